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
	"testing"
	"time"

	"github.com/birdcage/birdcage/harness/control"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/internal/testenv"
)

// TestLiveClusterCLI drives a live cluster through the built CLI, with real
// namespaces, programmers and BIRD containers: up --detach, a probe session
// in the background while `set` hands the no-encap routes from BIRD to the
// programmer, the gap table, the timeline, routes by owner, down — and then
// nothing of the run is left.
func TestLiveClusterCLI(t *testing.T) {
	testenv.NeedRoot(t)
	for _, bin := range []string{"bird", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s: %v", bin, err)
		}
	}
	dir := t.TempDir()
	cli := filepath.Join(dir, "birdcage")
	build := func(out, pkg string) {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	build(cli, ".")
	// up finds the programmer next to itself, as an installed birdcage does.
	build(filepath.Join(dir, "birdcage-programmer"), "../birdcage-programmer")

	birdcage := func(args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli, args...)
		cmd.Env = append(os.Environ(), "BIRDCAGE_PROGRAMMER=")
		b, err := cmd.CombinedOutput()
		t.Logf("$ birdcage %s\n%s", strings.Join(args, " "), b)
		return string(b), err
	}

	if len(control.Runs()) == 0 {
		out, err := birdcage("probe", "--for", "1s")
		if err == nil || !strings.Contains(out, "no birdcage cluster is up: start one with birdcage up --cluster") {
			t.Errorf("probe with no cluster up: want the no-cluster message and a failure, got %v: %s", err, out)
		}
	}

	out, err := birdcage("up", "-t", "noencap", "--cluster", "--detach")
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
			_, _ = birdcage("down", id)
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

	// A probe session in the background, the change while it runs.
	pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer pcancel()
	probe := exec.CommandContext(pctx, cli, "probe", "--for", "3s", "--run", id)
	pout, err := probe.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	probe.Stderr = probe.Stdout
	if err := probe.Start(); err != nil {
		t.Fatal(err)
	}
	var probeOut bytes.Buffer
	flowing := make(chan struct{})
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		sc := bufio.NewScanner(pout)
		once := false
		for sc.Scan() {
			probeOut.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "probing 6 flows") {
				once = true
				close(flowing)
			}
		}
	}()
	select {
	case <-flowing:
	case <-probeDone:
		t.Fatalf("probe ended before its flows flowed: %s", probeOut.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("probe flows did not start within 90s")
	}
	out, err = birdcage("set", "felix.programClusterRoutes=Enabled", "bgp.programClusterRoutes=Disabled", "--run", id)
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
	<-probeDone
	if err := probe.Wait(); err != nil {
		t.Fatalf("probe: %v\n%s", err, probeOut.String())
	}
	t.Logf("$ birdcage probe --for 3s (in the background)\n%s", probeOut.String())
	pText := probeOut.String()
	if !strings.Contains(pText, "SetProgramClusterRoutes(Felix=Enabled, BGP=Disabled)") {
		t.Errorf("the probe session did not overlap the change (its event is not in the probe's output)")
	}
	// The gap table's total row: sent and received must be non-zero (a
	// table of no traffic proves nothing).
	tm := regexp.MustCompile(`total \((\d+) flows, (\d+) with loss\)\s+(\d+)\s+(\d+)\s+(-?\d+)`).FindStringSubmatch(pText)
	if tm == nil || !strings.Contains(pText, "longest gap ms") {
		t.Fatalf("no gap table in the probe's output")
	}
	flows, _ := strconv.Atoi(tm[1])
	sent, _ := strconv.Atoi(tm[3])
	recv, _ := strconv.Atoi(tm[4])
	if flows != 6 || sent == 0 || recv == 0 {
		t.Errorf("gap table total: %d flows, sent %d, received %d; want 6 flows carrying probes", flows, sent, recv)
	}
	t.Logf("gap table total: %d flows, %s with loss, sent %d, received %d, lost %s", flows, tm[2], sent, recv, tm[5])

	out, err = birdcage("timeline", "node-1", "--run", id)
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

	out, err = birdcage("routes", "node-1", "--run", id)
	if err != nil || !strings.Contains(out, "programmer (proto 80): ") {
		t.Errorf("routes by owner: %v: %s", err, out)
	}
	out, err = birdcage("birdc", "node-1", "--run", id, "--", "show", "protocols")
	if err != nil || !strings.Contains(out, "Established") {
		t.Errorf("birdc show protocols: %v: %s", err, out)
	}

	// A node replaced through the CLI (no-encap: natively; the IPIP
	// upgrade needs the VM's kernel).
	out, err = birdcage("upgrade", "node-2", "--to", "3.33", "--signal", "TERM", "--run", id)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	for _, want := range []string{"UpgradeNode(node-2→3.33)", "BIRD(node-2) exited", "UpgradeNode(node-2) programmer synced", "BIRD(node-2) sessions Established"} {
		if !strings.Contains(out, want) {
			t.Errorf("upgrade's output does not say %q", want)
		}
	}
	if out, err := birdcage("upgrade", "node-9", "--to", "3.33", "--run", id); err == nil || !strings.Contains(out, "node-1, node-2, node-3") {
		t.Errorf("upgrade of a node the cluster lacks: want an error naming the nodes, got %v: %s", err, out)
	}

	pid := ownerPID(id)
	out, err = birdcage("down", id)
	if err != nil || !strings.Contains(out, "is down") {
		t.Fatalf("down: %v: %s", err, out)
	}
	// Nothing of the run is left: namespaces, processes (supervisor,
	// programmers, BIRD), socket, state dir.
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
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		// A programmer names the run's datastore on its command line; a
		// BIRD container's root is a bundle in the run's dir.
		runDir := filepath.Join(run.StateRoot, id)
		b, _ := os.ReadFile(p)
		root, _ := os.Readlink(filepath.Join(filepath.Dir(p), "root"))
		if bytes.Contains(b, []byte(runDir)) || strings.HasPrefix(root, runDir) {
			t.Errorf("process %s of the run left: %q (root %s)", filepath.Dir(p), bytes.ReplaceAll(b, []byte{0}, []byte{' '}), root)
		}
	}
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("control socket %s left", sock)
	}
	if _, err := os.Stat(filepath.Join(run.StateRoot, id)); err == nil {
		t.Errorf("state dir of run %s left", id)
	}
}
