package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/birdcage/birdcage/harness/control"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/topo"
)

// CLIEnv names a prebuilt birdcage binary for the CLI tests (with
// birdcage-programmer next to it or in $BIRDCAGE_PROGRAMMER), for runners
// that should not build, such as the VM.
const CLIEnv = env.CLI

// cliSession is the built CLI and a way to run it.
type cliSession struct {
	t   *testing.T
	cli string
}

func newCLISession(t *testing.T) *cliSession {
	t.Helper()
	testenv.NeedRoot(t)
	for _, bin := range []string{"bird", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s: %v", bin, err)
		}
	}
	if builtHere {
		// up finds the programmer next to itself, as an installed
		// birdcage does.
		t.Setenv(env.Programmer, "")
	}
	return &cliSession{t: t, cli: birdcageBin}
}

// run runs the CLI to completion and logs the command and its output.
func (s *cliSession) run(args ...string) (string, error) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, s.cli, args...).CombinedOutput()
	s.t.Logf("$ birdcage %s\n%s", strings.Join(args, " "), b)
	return string(b), err
}

// up brings a cluster up with --detach and returns its run ID; the test's
// cleanup takes it down if the test did not.
func (s *cliSession) up(args ...string) string {
	t := s.t
	t.Helper()
	out, err := s.run(append([]string{"up", "--cluster", "--detach"}, args...)...)
	if err != nil {
		t.Fatalf("up --detach: %v", err)
	}
	m := regexp.MustCompile(`run ([0-9a-f]{6}) is up`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("up --detach did not name the run: %s", out)
	}
	id := m[1]
	sock := control.Socket(id)
	t.Cleanup(func() {
		if _, err := os.Stat(sock); err == nil {
			_, _ = s.run("down", id)
		}
		_, _ = run.Clean(run.CleanOptions{RunID: id, Force: true})
	})
	st, err := os.Stat(sock)
	if err != nil {
		t.Fatalf("control socket: %v", err)
	}
	if st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("control socket %s: mode %v, want a 0600 socket", sock, st.Mode())
	}
	if _, err := os.Stat(filepath.Join(run.StateRoot, id, supervisorLog)); err != nil {
		t.Errorf("the detached supervisor's log is not in the run dir: %v", err)
	}
	return id
}

// background is a CLI command running while the test does something else.
type background struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	seen chan struct{} // closed when a line contains the awaited text
	done chan struct{}
}

// start runs the CLI in the background; seen closes once a line of its
// output contains await.
func (s *cliSession) start(await string, args ...string) *background {
	s.t.Helper()
	b := &background{cmd: exec.Command(s.cli, args...), seen: make(chan struct{}), done: make(chan struct{})}
	pout, err := b.cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	b.cmd.Stderr = b.cmd.Stdout
	if err := b.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = b.cmd.Process.Kill() })
	go func() {
		defer close(b.done)
		sc := bufio.NewScanner(pout)
		once := false
		for sc.Scan() {
			b.mu.Lock()
			b.out.WriteString(sc.Text() + "\n")
			b.mu.Unlock()
			if !once && strings.Contains(sc.Text(), await) {
				once = true
				close(b.seen)
			}
		}
	}()
	return b
}

func (b *background) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

// await waits for the awaited line, failing if the command ends first.
func (b *background) await(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-b.seen:
	case <-b.done:
		t.Fatalf("%s ended before it got going: %s", b.cmd.Args, b.output())
	case <-time.After(within):
		t.Fatalf("%s: nothing within %s: %s", b.cmd.Args, within, b.output())
	}
}

// wait waits for the command's end and returns its output.
func (b *background) wait(t *testing.T) string {
	t.Helper()
	<-b.done
	err := b.cmd.Wait()
	t.Logf("$ %s (in the background)\n%s", strings.Join(b.cmd.Args, " "), b.output())
	if err != nil {
		t.Fatalf("%s: %v", b.cmd.Args, err)
	}
	return b.output()
}

// gapTotal reads the gap table's total row; a table of no traffic proves
// nothing, so it fails unless probes were sent and received.
func gapTotal(t *testing.T, out string, wantFlows int) (sent, received, lost int) {
	t.Helper()
	m := regexp.MustCompile(`total \((\d+) flows, (\d+) with loss\)\s+(\d+)\s+(\d+)\s+(-?\d+)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "longest gap ms") {
		t.Fatalf("no gap table in the probe's output")
	}
	flows, _ := strconv.Atoi(m[1])
	sent, _ = strconv.Atoi(m[3])
	received, _ = strconv.Atoi(m[4])
	lost, _ = strconv.Atoi(m[5])
	if flows != wantFlows || sent == 0 || received == 0 {
		t.Fatalf("gap table total: %d flows, sent %d, received %d; want %d flows carrying probes", flows, sent, received, wantFlows)
	}
	t.Logf("gap table total: %d flows, %s with loss, sent %d, received %d, lost %d", flows, m[2], sent, received, lost)
	return sent, received, lost
}

// down takes the run down and checks nothing of it is left: namespaces,
// processes (supervisor, programmers, BIRD), socket, state dir.
func (s *cliSession) down(id string) {
	t := s.t
	t.Helper()
	pid := ownerPID(id)
	out, err := s.run("down", id)
	if err != nil || !strings.Contains(out, "is down") {
		t.Fatalf("down: %v: %s", err, out)
	}
	ents, _ := os.ReadDir(run.NetnsDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "bc"+id+"-") {
			t.Errorf("namespace %s left", e.Name())
		}
	}
	if pid > 0 {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("supervisor pid %d still running", pid)
		}
	}
	runDir := filepath.Join(run.StateRoot, id)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		// A programmer names the run's datastore on its command line; a
		// BIRD container's root is a bundle in the run's dir.
		b, _ := os.ReadFile(p)
		root, _ := os.Readlink(filepath.Join(filepath.Dir(p), "root"))
		if bytes.Contains(b, []byte(runDir)) || strings.HasPrefix(root, runDir) {
			t.Errorf("process %s of the run left: %q (root %s)", filepath.Dir(p), bytes.ReplaceAll(b, []byte{0}, []byte{' '}), root)
		}
	}
	if _, err := os.Stat(control.Socket(id)); err == nil {
		t.Errorf("control socket of run %s left", id)
	}
	if _, err := os.Stat(runDir); err == nil {
		t.Errorf("state dir of run %s left", id)
	}
}

// TestLiveClusterCLI drives a live cluster through the built CLI, with real
// namespaces, programmers and BIRD containers: up --detach, a probe session
// in the background while `set` hands the no-encap routes from BIRD to the
// programmer, the gap table, the timeline, routes by owner, a node
// replaced, down — and then nothing of the run is left.
func TestLiveClusterCLI(t *testing.T) {
	s := newCLISession(t)
	if len(control.Runs()) == 0 {
		out, err := s.run("probe", "--for", "1s")
		if err == nil || !strings.Contains(out, "no birdcage cluster is up: start one with birdcage up --cluster") {
			t.Errorf("probe with no cluster up: want the no-cluster message and a failure, got %v: %s", err, out)
		}
	}
	id := s.up("-t", "noencap")

	probe := s.start("probing 6 flows", "probe", "--for", "3s", "--run", id)
	probe.await(t, 90*time.Second)
	out, err := s.run("set", "felix.programClusterRoutes=Enabled", "bgp.programClusterRoutes=Disabled", "--run", id)
	if err != nil {
		t.Fatalf("set: %v", err)
	}
	for _, want := range []string{"SetProgramClusterRoutes(Felix=Enabled, BGP=Disabled)", "cluster converged",
		"node-1 (3.33): programmer programClusterRoutes=Enabled", "BIRD programClusterRoutes=Disabled"} {
		if !strings.Contains(out, want) {
			t.Errorf("set's output does not say %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^\s+\+\d+\.\d{3}s  SetProgramClusterRoutes`).MatchString(out) {
		t.Errorf("set's event is not stamped on the run's clock")
	}
	pText := probe.wait(t)
	if !strings.Contains(pText, "SetProgramClusterRoutes(Felix=Enabled, BGP=Disabled)") {
		t.Errorf("the probe session did not overlap the change (its event is not in the probe's output)")
	}
	gapTotal(t, pText, 6)

	out, err = s.run("timeline", "node-1", "--run", id)
	if err != nil {
		t.Fatalf("timeline: %v", err)
	}
	if !strings.Contains(out, "── SetProgramClusterRoutes(Felix=Enabled, BGP=Disabled)") {
		t.Errorf("timeline does not place the change among the route events")
	}
	// node-1's remote no-encap blocks were BIRD's and are now the
	// programmer's; the positive control is the owner sequence itself.
	handed := regexp.MustCompile(`(?m)^\s+\S+/\d+\s+.*BIRD \(proto bird\) → .*programmer \(proto 80\)\s+\(`).FindAllString(out, -1)
	if len(handed) != 2 {
		t.Errorf("timeline: want node-1's 2 remote blocks handed from BIRD to the programmer, got %d: %q", len(handed), handed)
	}

	out, err = s.run("routes", "node-1", "--run", id)
	if err != nil || !strings.Contains(out, "programmer (proto 80): ") {
		t.Errorf("routes by owner: %v: %s", err, out)
	}
	out, err = s.run("birdc", "node-1", "--run", id, "--", "show", "protocols")
	if err != nil || !strings.Contains(out, "Established") {
		t.Errorf("birdc show protocols: %v: %s", err, out)
	}

	// A node replaced through the CLI (no-encap: natively; the IPIP
	// upgrade is TestLiveClusterCLIUpgradeIPIP, natively on tunl0 and again
	// on the kernel's ipip in the VM).
	out, err = s.run("upgrade", "node-2", "--to", "3.33", "--signal", "TERM", "--run", id)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	for _, want := range []string{"UpgradeNode(node-2→3.33)", "BIRD(node-2) exited", "UpgradeNode(node-2) programmer synced", "BIRD(node-2) sessions Established", "(old BIRD got SIGTERM;"} {
		if !strings.Contains(out, want) {
			t.Errorf("upgrade's output does not say %q", want)
		}
	}
	if out, err := s.run("upgrade", "node-9", "--to", "3.33", "--run", id); err == nil || !strings.Contains(out, "node-1, node-2, node-3") {
		t.Errorf("upgrade of a node the cluster lacks: want an error naming the nodes, got %v: %s", err, out)
	}
	s.down(id)
}

// TestLiveClusterCLIRelease: `up --release 3.32` starts every node on the
// real release 3.32 (recorded as such, never as an alias), its BIRDs
// establish every session under 3.32's render (one passive end per mesh
// pair, Calico's timers, BGP routes at metric 1024), and `upgrade --to new`
// (the alias of 3.33) moves a node to 3.33. No-encap: natively.
func TestLiveClusterCLIRelease(t *testing.T) {
	s := newCLISession(t)
	id := s.up("-t", "noencap", "--release", "3.32")
	out, err := s.run("info", "--run", id)
	if err != nil {
		t.Fatalf("info: %v", err)
	}
	if n := strings.Count(out, " on 3.32"); n != 3 || strings.Contains(out, "pre-3.33") {
		t.Errorf("info: want 3 nodes on 3.32 and no alias, got:\n%s", out)
	}
	for _, node := range []string{"node-1", "node-2"} {
		out, err = s.run("birdc", node, "--run", id, "--", "show", "protocols", "all")
		if err != nil || !strings.Contains(out, "Established") {
			t.Fatalf("birdc %s show protocols all: %v: %s", node, err, out)
		}
		t.Logf("%s: %d sessions Established", node, strings.Count(out, "Established"))
	}
	out, err = s.run("upgrade", "node-2", "--to", "new", "--signal", "TERM", "--run", id)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	for _, want := range []string{"UpgradeNode(node-2→3.33)", "node-2 upgraded 3.32 → 3.33", "BIRD(node-2) sessions Established"} {
		if !strings.Contains(out, want) {
			t.Errorf("upgrade's output does not say %q:\n%s", want, out)
		}
	}
	s.down(id)
}

// TestLiveClusterCLIUpgradeIPIP is the headline upgrade through the CLI: an
// IPIP cluster on pre-3.33, node-2 upgraded to 3.33 with SIGKILL while
// probes run, the gap table read, node-2's timeline, down. Needs ipip (the
// VM: go test -exec ci/vm/run).
func TestLiveClusterCLIUpgradeIPIP(t *testing.T) {
	testenv.NeedRoot(t)
	r, err := run.New()
	if err != nil {
		t.Fatal(err)
	}
	f, err := topo.DetectFeatures(r)
	_ = r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !f.IPIP {
		testenv.Missing(t, testenv.IPIP, "the IPIP upgrade through the CLI needs tunl0")
	}
	// The probe window has to reach past the upgrade's start: 6 s at
	// native speed, scaled like every wait on a slower machine (in a
	// starved TCG guest the upgrade began 8 s after "probing").
	window := testenv.Env().Machine().Wait(6 * time.Second)
	s := newCLISession(t)
	id := s.up("-t", "ipip", "--release", "pre-3.33")
	probe := s.start("probing", "probe", "--for", window.String(), "--run", id)
	probe.await(t, 3*time.Minute)
	out, err := s.run("upgrade", "node-2", "--to", "3.33", "--run", id)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	for _, want := range []string{"UpgradeNode(node-2→3.33)", "UpgradeNode(node-2) programmer synced", "node-2 upgraded 3.32 → 3.33 (old BIRD got SIGKILL"} {
		if !strings.Contains(out, want) {
			t.Errorf("upgrade's output does not say %q", want)
		}
	}
	pText := probe.wait(t)
	if !strings.Contains(pText, "UpgradeNode(node-2→3.33)") {
		t.Errorf("the probe session did not overlap the upgrade")
	}
	_, _, lost := gapTotal(t, pText, 12)
	t.Logf("IPIP upgrade of node-2 with SIGKILL through the CLI: %d probes lost", lost)
	out, err = s.run("timeline", "node-2", "--run", id)
	if err != nil || !strings.Contains(out, "── UpgradeNode(node-2→3.33)") {
		t.Errorf("timeline: %v", err)
	}
	s.down(id)
}
