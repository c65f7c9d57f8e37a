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
	if p := os.Getenv(harness.ProgrammerEnv); p != "" {
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
	needLab(t)
	ctx := context.Background()
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
	}()
	hl, err := handmade.Build(ctx, r, handmade.Options{Programmer: programmer(t), Timing: harness.RealisticTiming()})
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
	s, err := l.Probes(ctx, lab.ProbeOptions{Rate: 200})
	if err != nil {
		t.Fatal(err)
	}
	// While attached, the BPF counters sit inside the lab's namespaces:
	// on node-1's eth0 (both directions) and on its workload's eth0.
	before := l.Snapshots()[0]
	n1 := "/var/run/netns/" + hl.Namespaces[1]
	if before.Netns != n1 {
		t.Fatalf("first snapshot is %s, want %s", before.Netns, n1)
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
	ns1 := filepath.Base(n1)
	if out, err := exec.Command("ip", "-n", ns1, "route", "add", "10.99.0.0/24", "dev", "eth0").CombinedOutput(); err != nil {
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
	if out, err := exec.Command("ip", "-n", ns1, "route", "del", "10.99.0.0/24").CombinedOutput(); err != nil {
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
