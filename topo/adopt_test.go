package topo

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/run"
)

// A node adopted from an existing namespace (as a kind node or a lab VM
// would be) gets workloads plugged in, and teardown leaves the namespace
// and its own interfaces as they were found.
func TestAdoptedNodeIsLeftAsFound(t *testing.T) {
	requireRoot(t)
	owner, err := run.New()
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	name := owner.Name("lab-node")
	lab, err := nsutil.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	owner.Defer("lab netns", func() error { lab.Close(); return nsutil.Delete(name) })
	before := linkNames(t, &Namespace{NS: lab})

	tp := New("adopt",
		WithPool("pods", "10.244.0.0/16", IPIPNever),
		WithNode("lab", Adopt(nsutil.Path(name)), Workloads(2)),
	)
	r, err := run.New()
	if err != nil {
		t.Fatal(err)
	}
	n, err := Build(context.Background(), tp, r, Options{})
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	node, _ := n.Node("lab")
	if !node.Adopted || len(node.Workloads) != 2 {
		t.Fatalf("adopted node: %+v", node)
	}
	during := linkNames(t, &node.Namespace)
	for _, wl := range node.Workloads {
		if !strings.Contains(during, wl.HostIface) {
			t.Errorf("workload %s's veth %s is not in the adopted namespace: %s", wl.Name, wl.HostIface, during)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if names, _ := nsutil.List(); !contains(names, name) {
		t.Fatalf("teardown deleted the adopted namespace %s", name)
	}
	if after := linkNames(t, &Namespace{NS: lab}); after != before {
		t.Errorf("adopted namespace's links changed: before %q, after %q", before, after)
	}
}

// Two runs building the same topology at once do not collide: each gets
// its own prefix, and both work.
func TestConcurrentRunsDoNotCollide(t *testing.T) {
	requireRoot(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	nets := make([]*Network, 2)
	runs := make([]*run.Run, 2)
	for i := range 2 {
		r, err := run.New()
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = r
		defer r.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			tp, _ := Builtin("noencap")
			nets[i], errs[i] = Build(context.Background(), tp, r, Options{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if runs[0].Prefix == runs[1].Prefix {
		t.Fatalf("two runs share the prefix %s", runs[0].Prefix)
	}
	for _, n := range nets {
		installStaticRoutes(t, n)
		assertAllWorkloadsReachable(t, n)
	}
}

func linkNames(t *testing.T, n *Namespace) string {
	t.Helper()
	h, err := n.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links, err := nsutil.Links(h)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, l := range links {
		s = append(s, l.Attrs().Name)
	}
	return strings.Join(s, ",")
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
