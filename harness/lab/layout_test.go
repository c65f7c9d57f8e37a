package lab

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/birdcage/birdcage/harness/encap"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// The link lines are TakeSnapshot's format ("NAME type TYPE up|down mtu …").
func TestTunnelOf(t *testing.T) {
	for _, c := range []struct {
		links []string
		want  string
	}{
		{[]string{"lo type device up mtu 65536", "tunl0 type ipip up mtu 1480 master \"\" mac "}, "kernel"},
		{[]string{"tunl0-peer type veth up mtu 1480", "tunl0 type veth up mtu 1480 master \"\" mac 02:00:00:00:00:01"}, "ebpf"},
		// Controls: no tunl0, and names that only begin like it.
		{[]string{"eth0 type veth up mtu 1500"}, ""},
		{[]string{"tunl0-peer type veth up mtu 1480", "tunl0-fb type ipip down mtu 1480"}, ""},
		{nil, ""},
	} {
		if got := tunnelOf(Snapshot{Parts: map[string][]string{"links": c.links}}); got != c.want {
			t.Errorf("%q: %q, want %q", c.links, got, c.want)
		}
	}
}

// The lab's layout for the encapsulation check: node addresses from the
// attach snapshot's underlay interfaces only, workloads from the manifest,
// and IPIP from the datastore's pool modes. Then encap.Check on it, a
// crafted report: an encapsulated flow passes, a bare one fails.
func TestEncapLayout(t *testing.T) {
	dir := t.TempDir()
	ds, err := datastore.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]string{"ipip": datastore.EncapAlways, "plain": datastore.EncapNever, "cross": datastore.EncapCrossSubnet} {
		cidr := map[string]string{"ipip": "10.244.0.0/16", "plain": "10.245.0.0/16", "cross": "10.246.0.0/16"}[name]
		if err := ds.Put(datastore.KindIPPool, name, datastore.IPPool{Name: name, CIDR: cidr, IPIPMode: mode}); err != nil {
			t.Fatal(err)
		}
	}
	node := func(name, netns, addr string, wls ...string) (*AttachedNode, Snapshot) {
		an := &AttachedNode{Name: name, Netns: netns, spec: &Node{Name: name, Interfaces: []string{"eth0"}}}
		for _, w := range wls {
			an.Workloads = append(an.Workloads, probe.Endpoint{Addr: netip.MustParseAddr(w)})
		}
		return an, Snapshot{Netns: netns, Parts: map[string][]string{"addrs": {"lo 127.0.0.1/8", "eth0 " + addr, "tunl0 10.244.1.0/32", "eth0 fe80::1/64"}}}
	}
	a, sa := node("a", "/ns/a", "10.10.0.10/24", "10.244.1.2", "10.245.1.2", "10.246.1.2")
	b, sb := node("b", "/ns/b", "10.10.0.11/24", "10.244.2.2", "10.245.2.2", "10.246.2.2")
	l := &Lab{M: &Manifest{Datastore: &Datastore{Dir: dir}}, Nodes: []*AttachedNode{a, b}, before: []Snapshot{sa, sb}, tunnel: "ebpf"}
	lay, ok, why := l.EncapLayout(context.Background())
	if !ok {
		t.Fatal(why)
	}
	if got := lay.Nodes[0].Addrs; len(got) != 1 || got[0] != netip.MustParseAddr("10.10.0.10") {
		t.Errorf("node a's addresses %v: want only eth0's IPv4 (not lo, tunl0, IPv6)", got)
	}
	for _, c := range []struct {
		dst  string
		want bool
	}{{"10.244.2.2", true}, {"10.245.2.2", false}, {"10.246.2.2", false /* same subnet */}} {
		if got := lay.Encapsulates(lay.Nodes[0], lay.Nodes[1], netip.MustParseAddr(c.dst)); got != c.want {
			t.Errorf("a → %s: encapsulates %v, want %v", c.dst, got, c.want)
		}
	}
	flow := func(bare uint64) *probe.Report {
		return &probe.Report{
			Flows: []probe.GapReport{{Flow: "a->b", SrcAddr: netip.MustParseAddr("10.244.1.2"), DstAddr: netip.MustParseAddr("10.244.2.2"), Sent: 100,
				Hops: []probe.HopCount{{Hop: "a/eth0 egress", Inner: 100 - bare, Packets: bare}, {Hop: "b/eth0 ingress"}}}},
			Tunnels: []probe.TunnelCount{{Hop: "a/eth0 egress", Src: netip.MustParseAddr("10.10.0.10"), Dst: netip.MustParseAddr("10.10.0.11"), Packets: 100 - bare}},
		}
	}
	if _, err := encap.Check(lay, flow(0)); err != nil {
		t.Errorf("encapsulated flow: %v", err)
	}
	if _, err := encap.Check(lay, flow(100)); !errors.Is(err, encap.ErrNotEncapsulated) {
		t.Errorf("bare flow: %v, want ErrNotEncapsulated", err)
	}
	// Guards: no tunl0, no datastore.
	if _, ok, _ := (&Lab{M: l.M}).EncapLayout(context.Background()); ok {
		t.Error("a lab without tunl0 claims a layout")
	}
	if _, ok, _ := (&Lab{M: &Manifest{}, tunnel: "kernel"}).EncapLayout(context.Background()); ok {
		t.Error("a lab without a datastore claims a layout")
	}
}
