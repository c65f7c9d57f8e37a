package run

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/internal/nsutil"
)

// NetnsDir is where named network namespaces live (as `ip netns` keeps them).
const NetnsDir = nsutil.Dir

// CleanOptions select what Clean removes.
type CleanOptions struct {
	// RunID limits cleaning to one run; empty means every run.
	RunID string
	// Force also cleans runs whose owner process is still alive.
	Force bool
	// DryRun reports without removing.
	DryRun bool
}

// CleanReport says what Clean found and removed.
type CleanReport struct {
	Runs       []string `json:"runs"`
	Namespaces []string `json:"namespaces"`
	Processes  []int    `json:"processes"`
	Containers []string `json:"containers"`
	Dirs       []string `json:"dirs"`
	// Sysctls are host-wide settings put back (key=value).
	Sysctls []string `json:"sysctls,omitempty"`
	// Skipped are runs left alone because their owner is alive.
	Skipped []string `json:"skipped,omitempty"`
}

// Clean removes what killed runs left behind: processes inside their
// namespaces (BIRD, programmers, runc), their OCI containers, their network
// namespaces, state dirs and temp dirs. Runs whose owner is still alive are
// skipped unless Force is set, so two runs at once never clean each other.
func Clean(opts CleanOptions) (CleanReport, error) {
	var rep CleanReport
	runs := map[string][]string{} // id -> netns names
	ents, err := os.ReadDir(NetnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return rep, fmt.Errorf("list %s: %w", NetnsDir, err)
	}
	for _, e := range ents {
		if id, ok := IDOf(e.Name()); ok {
			runs[id] = append(runs[id], e.Name())
		}
	}
	if dirs, err := os.ReadDir(StateRoot); err == nil {
		for _, d := range dirs {
			if _, ok := runs[d.Name()]; !ok && isRunID(d.Name()) {
				runs[d.Name()] = nil
			}
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(os.TempDir(), "birdcage-*"))
	for _, t := range tmps {
		if id, ok := tmpRunID(t); ok {
			if _, seen := runs[id]; !seen {
				runs[id] = nil
			}
		}
	}
	ids := make([]string, 0, len(runs))
	for id := range runs {
		if opts.RunID == "" || opts.RunID == id {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var errs []error
	for _, id := range ids {
		if !opts.Force && Alive(id) {
			rep.Skipped = append(rep.Skipped, id)
			continue
		}
		rep.Runs = append(rep.Runs, id)
		// 1. Containers first: runc's own view of its state.
		runcRoot := filepath.Join(StateRoot, id, "runc")
		for _, c := range listContainers(runcRoot) {
			rep.Containers = append(rep.Containers, c)
			if !opts.DryRun {
				if out, err := exec.Command("runc", "--root", runcRoot, "delete", "--force", c).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("runc delete %s: %v: %s", c, err, strings.TrimSpace(string(out))))
				}
			}
		}
		// 2. Every process still inside one of the run's namespaces.
		inodes := map[uint64]string{}
		for _, n := range runs[id] {
			var st unix.Stat_t
			if unix.Stat(filepath.Join(NetnsDir, n), &st) == nil {
				inodes[st.Ino] = n
			}
		}
		for _, pid := range processesIn(inodes) {
			rep.Processes = append(rep.Processes, pid)
			if !opts.DryRun {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		// 3. Host-wide limits the run raised (opt-in), back to their values.
		if !opts.DryRun {
			restored, err := restoreHostSysctls(filepath.Join(StateRoot, id))
			rep.Sysctls = append(rep.Sysctls, restored...)
			if err != nil {
				errs = append(errs, err)
			}
		}
		// 4. Namespaces, state dir, temp dirs.
		for _, n := range runs[id] {
			rep.Namespaces = append(rep.Namespaces, n)
			if !opts.DryRun {
				if err := nsutil.Delete(n); err != nil {
					errs = append(errs, err)
				}
			}
		}
		// Mounts under the state dir (a calico pod's overlay root) go
		// before it, so removing it never descends into a mount.
		if !opts.DryRun {
			for _, m := range mountsUnder(filepath.Join(StateRoot, id)) {
				if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
					errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
				}
			}
		}
		dirs := []string{filepath.Join(StateRoot, id)}
		for _, t := range tmps {
			if tid, ok := tmpRunID(t); ok && tid == id {
				dirs = append(dirs, t)
			}
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); err != nil {
				continue
			}
			rep.Dirs = append(rep.Dirs, d)
			if !opts.DryRun {
				if err := os.RemoveAll(d); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	// Temp files of processes with no run (ProcessTempPattern) whose
	// process is gone: what a killed config check or CI tool left.
	if opts.RunID == "" {
		for _, t := range staleProcessTemps() {
			rep.Dirs = append(rep.Dirs, t)
			if !opts.DryRun {
				if err := os.RemoveAll(t); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return rep, errors.Join(errs...)
}

// TempDir makes a temp dir carrying the run's ID, registered for cleanup.
func (r *Run) TempDir(what string) (string, error) {
	d, err := os.MkdirTemp("", "birdcage-"+r.ID+"-"+what+"-")
	if err != nil {
		return "", fmt.Errorf("temp dir for %s: %w", what, err)
	}
	r.Defer("temp dir "+d, func() error { return os.RemoveAll(d) })
	return d, nil
}

func isRunID(s string) bool {
	_, ok := IDOf("bc" + s + "-")
	return ok && len(s) == 6
}

func tmpRunID(path string) (string, bool) {
	rest, ok := strings.CutPrefix(filepath.Base(path), "birdcage-")
	if !ok || len(rest) < 7 || rest[6] != '-' || !isRunID(rest[:6]) {
		return "", false
	}
	return rest[:6], true
}

func listContainers(root string) []string {
	if _, err := os.Stat(root); err != nil {
		return nil
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return nil
	}
	out, err := exec.Command("runc", "--root", root, "list", "-q").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// processesIn returns the PIDs whose network namespace is one of inodes.
func processesIn(inodes map[uint64]string) []int {
	if len(inodes) == 0 {
		return nil
	}
	procs, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", p.Name(), "ns", "net"), &st) != nil {
			continue
		}
		if _, ok := inodes[st.Ino]; ok {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mountsUnder lists the mount points of this mount namespace inside dir,
// deepest first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if p := f[4]; strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}
