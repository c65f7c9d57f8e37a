// These tests hold the ownership rule in place. Felix's, in 3.31, 3.32 and
// 3.33 (felix/routetable/ownershippol/main_route_table_policy.go,
// RouteIsOurs): a main-table route with the programmer's protocol is ours
// whatever its device or type. BIRD's routes via tunl0 are claimed only when
// the programmer owns IPIP cluster routes in 3.33 (OwnBIRDIPIPRoutes, added
// on release-v3.33 6609dea54713), and only single-hop ones (a multipath
// route reads as device-less); never other protocols on tunl0, never proto
// bird on another device. With ProtocolOnAnyDevice off (the "narrow" knob,
// birdcage's rule before issue 25) our protocol counts only on our devices.
package routetable

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"golang.org/x/sys/unix"
)

func kr(proto kroute.Protocol, devs ...string) kroute.Route {
	k := kroute.Route{Family: 4, Dst: netip.MustParsePrefix("10.65.9.0/26"), Table: MainTable, Type: kroute.Unicast, Protocol: proto}
	for _, d := range devs {
		k.NextHops = append(k.NextHops, kroute.NextHop{Gateway: netip.MustParseAddr("10.0.1.12"), Device: d, Onlink: d == "tunl0"})
	}
	return k
}

func TestOwnershipPolicy(t *testing.T) {
	const bird, static = kroute.ProtoBIRD, kroute.Protocol(unix.RTPROT_STATIC)
	ownerIPIP := NewOwnershipPolicy(80, "tunl0", []string{"eth0"}, config.EnabledIPIPOnly, config.R333)
	notOwner := NewOwnershipPolicy(80, "tunl0", []string{"eth0"}, config.EnabledNoEncapOnly, config.R333)
	r332 := NewOwnershipPolicy(80, "tunl0", []string{"eth0"}, config.Enabled, config.R332)
	r331 := NewOwnershipPolicy(80, "tunl0", []string{"eth0"}, config.Enabled, config.R331)
	proto99 := NewOwnershipPolicy(99, "tunl0", []string{"eth0"}, config.Enabled, config.R333)
	narrow, narrow99 := ownerIPIP, proto99
	narrow.ProtocolOnAnyDevice, narrow99.ProtocolOnAnyDevice = false, false
	notOwnerNarrow := notOwner
	notOwnerNarrow.ProtocolOnAnyDevice = false

	mainTableOther := kr(80, "tunl0")
	mainTableOther.Table = 100
	blackhole := kr(80, "tunl0")
	blackhole.Type = kroute.Blackhole

	for _, tc := range []struct {
		name   string
		policy OwnershipPolicy
		route  kroute.Route
		ours   bool
		why    string
	}{
		{"proto bird on tunl0, owner of IPIP, 3.33", ownerIPIP, kr(bird, "tunl0"), true, "claimed"},
		{"proto bird on tunl0, not owner", notOwner, kr(bird, "tunl0"), false, "not claimed"},
		{"proto bird on tunl0, 3.32 owning IPIP", r332, kr(bird, "tunl0"), false, "not claimed"},
		{"proto bird on tunl0, 3.31 owning IPIP", r331, kr(bird, "tunl0"), false, "not claimed"},
		{"proto bird on eth0, owner", ownerIPIP, kr(bird, "eth0"), false, "only single-hop proto bird via tunl0"},
		{"proto bird multipath tunl0+eth0, owner", ownerIPIP, kr(bird, "tunl0", "eth0"), false, "only single-hop proto bird via tunl0"},
		{"proto bird multipath all tunl0, owner", ownerIPIP, kr(bird, "tunl0", "tunl0"), false, "only single-hop proto bird via tunl0"},
		{"proto static on tunl0, owner", ownerIPIP, kr(static, "tunl0"), false, "neither ours"},
		{"proto boot on tunl0, owner", ownerIPIP, kr(unix.RTPROT_BOOT, "tunl0"), false, "neither ours"},
		{"our proto on tunl0, not owner", notOwner, kr(80, "tunl0"), true, "on any device"},
		{"our proto on tunl0, 3.31", r331, kr(80, "tunl0"), true, "on any device"},
		{"our proto on a foreign device", ownerIPIP, kr(80, "docker0"), true, "on any device"},
		{"our proto, blackhole", ownerIPIP, blackhole, true, "on any device"},
		{"our proto, no next hop", ownerIPIP, kr(80), true, "on any device"},
		{"configured proto 99, route proto 80", proto99, kr(80, "tunl0"), false, "neither ours"},
		{"configured proto 99, route proto 99", proto99, kr(99, "docker0"), true, "on any device"},
		{"narrow: our proto on tunl0, not owner", notOwnerNarrow, kr(80, "tunl0"), true, "our device"},
		{"narrow: our proto on a workload iface", notOwnerNarrow, kr(80, "cali1234"), true, "our device"},
		{"narrow: our proto on an uplink", notOwnerNarrow, kr(80, "eth0"), true, "our device"},
		{"narrow: our proto on a foreign device", narrow, kr(80, "docker0"), false, "not one of our devices"},
		{"narrow: our proto multipath with a foreign device", narrow, kr(80, "eth0", "eth9"), false, "not one of our devices"},
		{"narrow: configured proto 99, route proto 99", narrow99, kr(99, "tunl0"), true, "our device"},
		{"narrow: blackhole", narrow, blackhole, false, "not a unicast"},
		{"narrow: no next hop", narrow, kr(80), false, "no next-hop"},
		{"another table", ownerIPIP, mainTableOther, false, "not the main table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, why := tc.policy.RouteIsOurs(tc.route)
			if ours != tc.ours || !strings.Contains(why, tc.why) {
				t.Errorf("%s: RouteIsOurs = %v (%q); want %v (%q)", tc.route, ours, why, tc.ours, tc.why)
			}
		})
	}
}

func TestOwnsBIRDTunnelRoutesMatrix(t *testing.T) {
	for _, rel := range config.Releases {
		for _, v := range config.Values {
			want := rel == config.R333 && (v == config.EnabledIPIPOnly || v == config.Enabled)
			if got := ownsBIRDTunnelRoutes(v, rel); got != want {
				t.Errorf("release %s, programClusterRoutes %s: claim = %v, want %v", rel, v, got, want)
			}
		}
	}
}
