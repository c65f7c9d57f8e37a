package handmade_test

// The attach mode against a lab birdcage did not build: a hand-made lab's
// namespaces are attached to (route timelines, probes, BPF counters), its
// routes are really programmed by its own BIRD and programmer, and after
// detaching every namespace is exactly as found. A route added behind the
// lab's back is the positive control: the comparison sees it.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/timing"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/lab"
	"github.com/birdcage/birdcage/harness/lab/handmade"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/internal/testenv"
)

// programmer builds the route programmer once per test binary.
func programmer(t *testing.T) string {
	t.Helper()
	if p := testenv.Env().Programmer; p != "" {
		return p
	}
	bin := filepath.Join(t.TempDir(), "birdcage-programmer")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/birdcage/birdcage/cmd/birdcage-programmer")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build programmer: %v\n%s", err, out)
	}
	return bin
}

func needLab(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t)
	for _, b := range []string{"ip", "bird", "birdc", "bash", "sysctl"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("needs %s: %v", b, err)
		}
	}
}

// waitOwned waits until every node's remote blocks are routed only by the
// owner's protocol.
func waitOwned(ctx context.Context, t *testing.T, l *lab.Lab, proto kroute.Protocol) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, n := range l.Nodes {
		for _, b := range l.RemoteBlocks(n.Name) {
			if err := l.WaitOwnedOnlyBy(ctx, n.Name, b, proto); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestAttachLeavesHandmadeLabAsFound(t *testing.T) {
	t.Run("ip-netns", func(t *testing.T) { attachLeavesLabAsFound(t, handmade.NetnsFlavour) })
	t.Run("runc", func(t *testing.T) {
		if _, err := exec.LookPath("runc"); err != nil {
			t.Skipf("needs runc (Debian package runc): %v", err)
		}
		attachLeavesLabAsFound(t, handmade.RuncFlavour)
	})
}

func attachLeavesLabAsFound(t *testing.T, flavour handmade.Flavour) {
	needLab(t)
	ctx := context.Background()
	var hl *handmade.Lab
	r, err := run.New()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
		names, _ := nsutil.List()
		for _, n := range names {
			if strings.HasPrefix(n, r.Prefix) {
				t.Errorf("namespace %s left after the lab's teardown", n)
			}
		}
		if hl != nil && hl.RuncRoot != "" {
			// Asking runc would recreate its --root; its state dir says.
			for _, c := range hl.Containers {
				if _, err := os.Stat(filepath.Join(hl.RuncRoot, c)); err == nil {
					t.Errorf("container %s left after the lab's teardown", c)
				}
			}
		}
		if hl == nil {
			return
		}
		if out, err := exec.Command("pgrep", "-f", hl.Dir).Output(); err == nil {
			t.Errorf("processes of the lab left after its teardown: %s", out)
		}
	}()
	hl, err = handmade.Build(ctx, r, handmade.Options{Flavour: flavour, Programmer: programmer(t), Timing: timing.Realistic()})
	if err != nil {
		t.Fatal(err)
	}
	if err := hl.WaitReady(ctx, kroute.ProtoBIRD); err != nil {
		t.Fatal(err)
	}
	m, err := lab.Load(hl.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	// 1. Attach; the blocks come from the lab's (read-only) datastore.
	l, err := lab.Attach(ctx, m, lab.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Detach()
	if len(l.Nodes) != 3 || len(l.RemoteBlocks("node-1")) != 2 {
		t.Fatalf("attached nodes %d, node-1's remote blocks %v", len(l.Nodes), l.RemoteBlocks("node-1"))
	}
	// 2. Guard: the lab's BIRD programs the no-encap routes (3.33 defaults).
	waitOwned(ctx, t, l, kroute.ProtoBIRD)

	// 3. Probes between every pair; they flow, so the lab really forwards.
	s, err := l.Probes(ctx, harness.ProbeOptions{Rate: 200})
	if err != nil {
		t.Fatal(err)
	}
	// While attached, the BPF counters sit inside the lab's namespaces:
	// on node-1's eth0 (both directions) and on its workload's eth0.
	before := l.Snapshots()[0]
	n1 := l.Nodes[0].Netns
	if before.Netns != n1 {
		t.Fatalf("first snapshot is %s, want %s", before.Netns, n1)
	}
	if flavour == handmade.RuncFlavour {
		// The manifest names node-1 by container: attach asked runc.
		if m.Nodes[0].Netns.Container != hl.Containers[0] || !strings.HasPrefix(n1, "/proc/") {
			t.Fatalf("node-1 is %+v, resolved to %s: want container %s, resolved to /proc/PID/ns/net", m.Nodes[0].Netns, n1, hl.Containers[0])
		}
		// The programmer and BIRD run inside node-1's container: their
		// network namespace is the container's, not the host's.
		for _, f := range []string{"bird.pid", "programmer.pid"} {
			out, err := exec.Command("runc", "--root", hl.RuncRoot, "exec", hl.Containers[0], "sh", "-c",
				`readlink /proc/$(cat "$1")/ns/net /proc/1/ns/net`, "-", filepath.Join(hl.Dir, "nodes", "node-1", f)).CombinedOutput()
			ns := strings.Fields(string(out))
			if err != nil || len(ns) != 2 || ns[0] != ns[1] {
				t.Fatalf("%s of node-1 inside its container: %v: %s", f, err, out)
			}
			host, _ := os.Readlink(n1)
			if ns[0] != host {
				t.Fatalf("node-1's %s is in %s, its container's namespace (attach resolved) is %s", f, ns[0], host)
			}
		}
	}
	during, err := lab.TakeSnapshot(n1)
	if err != nil {
		t.Fatal(err)
	}
	if d := lab.Compare(before, during); len(d.Added["tcx"])+len(d.Added["filters"]) != 2 {
		t.Errorf("while probing, node-1's namespace should carry 2 BPF counters (eth0 ingress and egress); the comparison says:\n%s", d)
	}
	rep, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Flows) != 6 || rep.Total.Received == 0 {
		t.Fatalf("probe report: %d flows, %d received", len(rep.Flows), rep.Total.Received)
	}

	// 4. Positive control: a change behind the lab's back shows.
	in1 := func(args ...string) *exec.Cmd {
		return exec.Command("nsenter", append([]string{"--net=" + n1, "ip"}, args...)...)
	}
	if out, err := in1("route", "add", "10.99.0.0/24", "dev", "eth0").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	after, err := lab.TakeSnapshot(n1)
	if err != nil {
		t.Fatal(err)
	}
	d := lab.Compare(before, after)
	if d.Empty() || !strings.Contains(d.String(), "routes: added: table 254 type 1 10.99.0.0/24") {
		t.Fatalf("a route added by hand is not in the comparison: %q", d.String())
	}
	if out, err := in1("route", "del", "10.99.0.0/24").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}

	// 5. Detach: probes, counters and monitors gone, every namespace as
	// found (links, addresses, routes, qdiscs, filters, TCX programs).
	diffs, err := l.Detach()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Errorf("the lab is not as found:\n%s", d)
	}
	if len(l.Snapshots()) != 6 {
		t.Errorf("%d namespaces compared, want 6 (3 nodes, 3 workloads)", len(l.Snapshots()))
	}
	fmt.Printf("attached to %s: %d namespaces compared before/after, %d probes received on %d flows, none changed\n",
		m.Name, len(l.Snapshots()), rep.Total.Received, len(rep.Flows))
}
