package judge

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/topo"
)

// topoFabric is a topology's facts as a Fabric, with the workloads' nodes
// given (harness's fabric reads them from the built network).
type topoFabric struct {
	tp        *topo.Topology
	workloads map[netip.Addr]string
}

func (f topoFabric) Planes() []string { return f.tp.Planes() }

func (f topoFabric) Uplink(node, plane string) string {
	for _, u := range f.tp.Uplinks(node) {
		if u.Plane == plane {
			return u.Interface
		}
	}
	return ""
}

func (f topoFabric) WorkloadNode(a netip.Addr) string { return f.workloads[a] }

// The plane each flow took, from hop counters on the built-in dual-ToR
// topology's uplinks (no namespaces: the analysis reads only the
// topology's facts and the report).
func TestPlaneOfFlowAndTable(t *testing.T) {
	tp, err := topo.Builtin("dualtor")
	if err != nil {
		t.Fatal(err)
	}
	planes := tp.Planes()
	if len(planes) != 2 {
		t.Fatalf("dualtor planes %v, want two", planes)
	}
	up := map[string]string{} // plane -> node-1's uplink there
	for _, u := range tp.Uplinks("node-1") {
		up[u.Plane] = u.Interface
	}
	a, b := netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")
	f := topoFabric{tp: tp, workloads: map[netip.Addr]string{a: "node-1", b: "node-2"}}
	hop := func(iface, dir string, n uint64) probe.HopCount {
		return probe.HopCount{Hop: "node-1/" + iface + " " + dir, Packets: n}
	}
	rep := &probe.Report{Flows: []probe.GapReport{
		{Flow: "f1", SrcAddr: a, DstAddr: b, Received: 10, Hops: []probe.HopCount{hop(up[planes[0]], "egress", 10)}},
		{Flow: "f2", SrcAddr: a, DstAddr: b, Received: 10, Hops: []probe.HopCount{hop(up[planes[0]], "egress", 4), hop(up[planes[1]], "egress", 6)}},
		{Flow: "f3", SrcAddr: a, DstAddr: b, Received: 0},
		{Flow: "f4", SrcAddr: a, DstAddr: b, Received: 10, Hops: []probe.HopCount{hop(up[planes[1]], "ingress", 10)}},
	}}
	want := map[string]string{"f1": planes[0], "f2": "both", "f3": "", "f4": ""}
	for _, g := range rep.Flows {
		if got := PlaneOfFlow(f, g); got != want[g.Flow] {
			t.Errorf("%s left by %q, want %q (ingress counters do not say how a flow left)", g.Flow, got, want[g.Flow])
		}
	}
	if per := FlowsPerPlane(f, rep); per[planes[0]] != 1 || per["both"] != 1 || per[""] != 2 {
		t.Errorf("flows per plane %v", per)
	}
	tab := PlaneTable(f, rep)
	lines := strings.Split(strings.TrimRight(tab, "\n"), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], "out plane "+planes[0]) || !strings.Contains(lines[0], "in plane "+planes[1]) {
		t.Fatalf("plane table:\n%s", tab)
	}
	if f := strings.Fields(lines[1]); f[0] != "f1" || f[1] != "10" || f[len(f)-2] != planes[0] {
		t.Errorf("f1's row %q: want 10 packets out of plane %s, and that plane named", lines[1], planes[0])
	}
}
