package judge

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/instrument/probe/report"
)

// fakeCluster is a cluster of n nodes with one workload each, as far as a
// flow plan looks (no namespaces).
type fakeCluster []NodeEndpoint

func newFakeCluster(n int) fakeCluster {
	var c fakeCluster
	for i := range n {
		name := fmt.Sprintf("node-%d", i+1)
		c = append(c, NodeEndpoint{Node: name, Endpoint: report.Endpoint{Name: name + "/wl-0", Netns: "/run/netns/x-" + name, Iface: "eth0",
			Addr: netip.AddrFrom4([4]byte{10, 65, byte(i), 1})}})
	}
	return c
}

func (c fakeCluster) PlanFlows(focus []string, sample int, seed uint64) (FlowPlan, error) {
	return PlanFlows(c, focus, sample, seed)
}

func TestPlanFlows(t *testing.T) {
	c := newFakeCluster(20)
	p, err := c.PlanFlows([]string{"node-3"}, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.FocusFlows != 38 || p.Sampled != 16 || p.Among != 19*18 || len(p.Flows) != 54 {
		t.Fatalf("plan %+v (%d flows); want 38 focus + 16 of 342", p, len(p.Flows))
	}
	seen := map[string]bool{}
	for i, f := range p.Flows {
		if seen[f.Name()] {
			t.Errorf("flow %s twice", f.Name())
		}
		seen[f.Name()] = true
		touches := strings.HasPrefix(f.Src.Name, "node-3/") || strings.HasPrefix(f.Dst.Name, "node-3/")
		if (i < p.FocusFlows) != touches {
			t.Errorf("flow %d %s: focus flows first, then only flows away from node-3", i, f.Name())
		}
	}
	// Every pair with the focus node, both ways.
	for i := 1; i <= 20; i++ {
		if i == 3 {
			continue
		}
		for _, n := range []string{fmt.Sprintf("node-3/wl-0->node-%d/wl-0", i), fmt.Sprintf("node-%d/wl-0->node-3/wl-0", i)} {
			if !seen[n] {
				t.Errorf("missing focus flow %s", n)
			}
		}
	}
	// The same seed gives the same plan; another seed (almost surely) not.
	again, _ := c.PlanFlows([]string{"node-3"}, 16, 1)
	other, _ := c.PlanFlows([]string{"node-3"}, 16, 2)
	if fmt.Sprint(names(again)) != fmt.Sprint(names(p)) {
		t.Error("same seed, different plan")
	}
	if fmt.Sprint(names(other)) == fmt.Sprint(names(p)) {
		t.Error("different seed, same sample")
	}
	if s := p.String(); !strings.Contains(s, "all 38 flows to and from node-3") || !strings.Contains(s, "16 of the 342") {
		t.Errorf("String() = %q", s)
	}
	// A sample beyond the rest is every pair; an unknown node is an error.
	all, _ := c.PlanFlows([]string{"node-1"}, 10000, 1)
	if len(all.Flows) != 20*19 {
		t.Errorf("oversized sample: %d flows, want all 380", len(all.Flows))
	}
	if _, err := c.PlanFlows([]string{"node-99"}, 1, 1); err == nil || !strings.Contains(err.Error(), "node-99") {
		t.Errorf("unknown focus node: %v", err)
	}
}

func names(p FlowPlan) []string {
	var out []string
	for _, f := range p.Flows {
		out = append(out, f.Name())
	}
	return out
}
