package route

import (
	"net/netip"
	"testing"
)

// The log lines and error texts quote routes in this form; it must not
// change with how String is implemented.
func TestRouteString(t *testing.T) {
	gw := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	for _, tc := range []struct {
		r    Route
		want string
	}{
		{Route{Dst: netip.MustParsePrefix("10.65.2.0/26"), NextHops: []NextHop{{Gateway: gw("10.0.1.12"), Device: "tunl0", OnLink: true}}},
			"10.65.2.0/26 via 10.0.1.12 dev tunl0 onlink"},
		{Route{Dst: netip.MustParsePrefix("10.65.1.5/32"), NextHops: []NextHop{{Device: "cali1"}}},
			"10.65.1.5/32 dev cali1 scope link"},
		{Route{Dst: netip.MustParsePrefix("10.67.3.0/26"), NextHops: []NextHop{{Gateway: gw("10.0.1.1"), Device: "eth0"}, {Gateway: gw("10.0.2.1"), Device: "eth1"}}},
			"10.67.3.0/26 nexthop via 10.0.1.1 dev eth0 nexthop via 10.0.2.1 dev eth1"},
		{Route{Dst: netip.MustParsePrefix("fd00:67:0:2::/122"), NextHops: []NextHop{{Gateway: gw("fd00:1::12"), Device: "eth0"}}},
			"fd00:67:0:2::/122 via fd00:1::12 dev eth0"},
		{Route{Dst: netip.MustParsePrefix("10.68.0.0/26")}, "10.68.0.0/26"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
	if got := (NextHop{Gateway: gw("10.0.1.12"), Device: "eth0"}).String(); got != "via 10.0.1.12 dev eth0" {
		t.Errorf("NextHop.String() = %q", got)
	}
}
