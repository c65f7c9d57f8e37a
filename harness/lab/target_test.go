package lab

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/instrument/probe"
)

// A lab's upgrade action picks its own BIRD and programmer: the options a
// built cluster honours for them are refused, naming the field, before
// any command runs.
func TestLabUpgradeRefusesWhatItCannotDo(t *testing.T) {
	l := &Lab{M: &Manifest{Name: "x"}, Nodes: []*AttachedNode{{Name: "node-2"}}}
	for _, c := range []struct {
		o    harness.UpgradeOptions
		want string
	}{
		{harness.UpgradeOptions{BIRD: "3.1"}, "field BIRD"},
		{harness.UpgradeOptions{Programmer: "/bin/true"}, "field Programmer"},
	} {
		_, err := l.UpgradeNode(context.Background(), "node-2", "3.33", c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "lab x") {
			t.Errorf("%+v: err %v, want one naming the lab and %q", c.o, err, c.want)
		}
	}
	if _, err := l.UpgradeNode(context.Background(), "node-9", "3.33", harness.UpgradeOptions{}); err == nil || !strings.Contains(err.Error(), `no node "node-9"`) {
		t.Errorf("unknown node: %v", err)
	}
}

// The lab answers the Target's questions from its manifest: nodes in
// order, blocks, which node a workload is on; it does not claim to know
// the underlay gateway.
func TestLabAsTarget(t *testing.T) {
	b1, b2 := netip.MustParsePrefix("10.244.1.0/26"), netip.MustParsePrefix("10.244.2.0/26")
	w2 := netip.MustParseAddr("10.244.2.5")
	l := &Lab{M: &Manifest{Name: "x"}, Nodes: []*AttachedNode{
		{Name: "node-1", Blocks: []netip.Prefix{b1}},
		{Name: "node-2", Blocks: []netip.Prefix{b2}, Workloads: []probe.Endpoint{{Name: "node-2/w", Addr: w2}}},
	}}
	if got := strings.Join(l.NodeNames(), ","); got != "node-1,node-2" {
		t.Errorf("NodeNames %s", got)
	}
	if got := l.RemoteBlocks("node-1"); len(got) != 1 || got[0] != b2 {
		t.Errorf("RemoteBlocks(node-1) %v", got)
	}
	if got := l.NodeBlocks("node-2"); len(got) != 1 || got[0] != b2 {
		t.Errorf("NodeBlocks(node-2) %v", got)
	}
	if got := l.WorkloadNode(w2); got != "node-2" {
		t.Errorf("WorkloadNode %q", got)
	}
	if got := l.WorkloadNode(netip.MustParseAddr("10.244.1.9")); got != "" {
		t.Errorf("WorkloadNode of no workload %q", got)
	}
	if _, ok := l.BlockGateway(b2); ok {
		t.Error("a lab claims to know a block's gateway")
	}
	if l.NodeRouteSource("node-9") != nil {
		t.Error("NodeRoutes of an unknown node")
	}
	if _, err := l.NodeRouteSource("node-2").Routes(b2); err == nil {
		t.Error("routes read without a timeline")
	}
	if l.TargetName() != "lab:x" {
		t.Errorf("TargetName %s", l.TargetName())
	}
}
