package kroute_test

// The route type against the kernel: routes written by netlink into a test
// namespace come back through FromNetlink with every field the kernel keeps
// (protocol, metric, type, scope, onlink, multipath weights), and String
// reads like `ip route` — checked against iproute2's own output.

import (
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/kroute/nlroute"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/testenv"
)

func TestProtocolNames(t *testing.T) {
	for p, want := range map[kroute.Protocol]string{2: "kernel", 3: "boot", 4: "static", 12: "bird", 80: "80", 99: "99"} {
		if got := p.String(); got != want {
			t.Errorf("Protocol(%d) = %q, want %q", int(p), got, want)
		}
	}
}

func TestStringOfConstructedRoutes(t *testing.T) {
	gw := netip.MustParseAddr("10.96.0.2")
	for _, c := range []struct {
		r    kroute.Route
		want string
	}{
		{kroute.Route{Dst: netip.MustParsePrefix("10.65.2.0/26"), Type: kroute.Unicast, Protocol: 12, Metric: 32, Table: kroute.MainTable,
			NextHops: []kroute.NextHop{{Gateway: gw, Device: "tunl0", Onlink: true}}},
			"10.65.2.0/26 via 10.96.0.2 dev tunl0 proto bird metric 32 onlink"},
		{kroute.Route{Dst: netip.MustParsePrefix("10.65.1.0/26"), Type: kroute.Blackhole, Protocol: 12, Table: kroute.MainTable},
			"blackhole 10.65.1.0/26 proto bird metric 0"},
		{kroute.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Type: kroute.Unicast, Protocol: 80, Table: 100,
			NextHops: []kroute.NextHop{{Gateway: gw, Device: "eth0"}}},
			"default via 10.96.0.2 dev eth0 proto 80 metric 0 table 100"},
		{kroute.Route{Dst: netip.MustParsePrefix("10.65.3.0/26"), Type: kroute.Unicast, Protocol: 12, Table: kroute.MainTable,
			NextHops: []kroute.NextHop{{Gateway: gw, Device: "eth0", Weight: 1}, {Gateway: gw.Next(), Device: "eth1", Weight: 2, Flags: []string{"linkdown"}}}},
			"10.65.3.0/26 proto bird metric 0 nexthop via 10.96.0.2 dev eth0 nexthop via 10.96.0.3 dev eth1 weight 2 linkdown"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}

// Against the kernel: write routes with netlink, read them back by a dump,
// and compare with what `ip route` prints for the same namespace.
func TestFromNetlinkRoundTrip(t *testing.T) {
	n := testenv.NewNetNS(t, "kroute")
	v0 := n.Veth(t, "v0", "v0p", "10.50.0.1/24")
	v1 := n.Veth(t, "v1", "v1p", "10.51.0.1/24")
	dst := func(s string) *net.IPNet { _, p, _ := net.ParseCIDR(s); return p }
	h := n.Handle
	for _, r := range []*netlink.Route{
		{Dst: dst("10.60.0.0/26"), Gw: net.ParseIP("10.97.0.2"), LinkIndex: v0.Attrs().Index, Protocol: 12, Priority: 32, Flags: int(netlink.FLAG_ONLINK)},
		{Dst: dst("10.61.0.0/26"), Type: unix.RTN_BLACKHOLE, Protocol: 12},
		{Dst: dst("10.62.0.0/26"), Type: unix.RTN_UNREACHABLE, Protocol: 80},
		{Dst: dst("10.63.0.0/26"), Protocol: 12, MultiPath: []*netlink.NexthopInfo{
			{LinkIndex: v0.Attrs().Index, Gw: net.ParseIP("10.50.0.2")},
			{LinkIndex: v1.Attrs().Index, Gw: net.ParseIP("10.51.0.2"), Hops: 1},
		}},
	} {
		if err := h.RouteAdd(r); err != nil {
			t.Fatalf("add %v: %v", r, err)
		}
	}
	links, err := nsutil.Links(h)
	if err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	rs, err := nsutil.Routes(h, netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]kroute.Route{}
	for _, r := range rs {
		kr := nlroute.FromNetlink(r, nlroute.DevNames(names))
		got[kr.Dst.String()] = kr
	}
	on := got["10.60.0.0/26"]
	if on.Family != 4 || on.Protocol != kroute.ProtoBIRD || on.Metric != 32 || on.Type != kroute.Unicast || !on.Onlink() ||
		len(on.NextHops) != 1 || on.NextHops[0].Device != "v0" || on.NextHops[0].Gateway != netip.MustParseAddr("10.97.0.2") {
		t.Errorf("onlink route read as %+v", on)
	}
	if bh := got["10.61.0.0/26"]; bh.Type != kroute.Blackhole || bh.Forwards() || len(bh.NextHops) != 0 {
		t.Errorf("blackhole read as %+v", bh)
	}
	if un := got["10.62.0.0/26"]; un.Type != kroute.Unreachable || un.Forwards() || un.Protocol != kroute.ProtoCalicoDefault {
		t.Errorf("unreachable read as %+v", un)
	}
	mp := got["10.63.0.0/26"]
	if !mp.Multipath() || len(mp.NextHops) != 2 || mp.NextHops[0].Weight != 1 || mp.NextHops[1].Weight != 2 ||
		strings.Join(mp.Devices(), ",") != "v0,v1" || len(mp.Gateways()) != 2 {
		t.Errorf("multipath read as %+v", mp)
	}

	// iproute2 agrees on what each route is (its spelling of the same facts).
	out, err := exec.Command("ip", "-n", n.Name, "route", "show", "table", "main").CombinedOutput()
	if err != nil {
		t.Skipf("ip route: %v (%s)", err, out)
	}
	ip := string(out)
	for _, want := range []string{
		"10.60.0.0/26 via 10.97.0.2 dev v0 proto bird metric 32 onlink",
		"blackhole 10.61.0.0/26 proto bird",
		"unreachable 10.62.0.0/26 proto 80",
	} {
		if !strings.Contains(ip, want) {
			t.Errorf("ip route has no %q:\n%s", want, ip)
		}
		k := got[strings.Fields(strings.TrimPrefix(strings.TrimPrefix(want, "blackhole "), "unreachable "))[0]]
		if s := k.String(); !strings.HasPrefix(s, want) {
			t.Errorf("ours %q does not begin like iproute2's %q", s, want)
		}
	}
}
