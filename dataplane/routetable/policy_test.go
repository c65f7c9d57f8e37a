// These tests hold the ownership rule of the design's "where BIRD does not
// come back" section in place: the programmer's routes are its protocol on
// its devices; BIRD's routes via tunl0 are claimed only when the programmer
// owns IPIP cluster routes in a release with the rule; never other protocols
// on tunl0, never proto bird on another device.
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
	pre333 := NewOwnershipPolicy(80, "tunl0", []string{"eth0"}, config.Enabled, config.Pre333)
	proto99 := NewOwnershipPolicy(99, "tunl0", []string{"eth0"}, config.Enabled, config.R333)

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
		{"proto bird on tunl0, pre-3.33 release owning IPIP", pre333, kr(bird, "tunl0"), false, "not claimed"},
		{"proto bird on eth0, owner", ownerIPIP, kr(bird, "eth0"), false, "only proto bird via tunl0"},
		{"proto bird multipath tunl0+eth0, owner", ownerIPIP, kr(bird, "tunl0", "eth0"), false, "only proto bird via tunl0"},
		{"proto bird multipath all tunl0, owner", ownerIPIP, kr(bird, "tunl0", "tunl0"), true, "claimed"},
		{"proto static on tunl0, owner", ownerIPIP, kr(static, "tunl0"), false, "neither ours"},
		{"proto boot on tunl0, owner", ownerIPIP, kr(unix.RTPROT_BOOT, "tunl0"), false, "neither ours"},
		{"our proto on tunl0, not owner", notOwner, kr(80, "tunl0"), true, "our device"},
		{"our proto on tunl0, pre-3.33", pre333, kr(80, "tunl0"), true, "our device"},
		{"our proto on a workload iface", notOwner, kr(80, "cali1234"), true, "our device"},
		{"our proto on an uplink", notOwner, kr(80, "eth0"), true, "our device"},
		{"our proto on a foreign device", ownerIPIP, kr(80, "docker0"), false, "not one of our devices"},
		{"our proto multipath with a foreign device", ownerIPIP, kr(80, "eth0", "eth9"), false, "not one of our devices"},
		{"configured proto 99, route proto 80", proto99, kr(80, "tunl0"), false, "neither ours"},
		{"configured proto 99, route proto 99", proto99, kr(99, "tunl0"), true, "our device"},
		{"another table", ownerIPIP, mainTableOther, false, "not the main table"},
		{"blackhole", ownerIPIP, blackhole, false, "not a unicast"},
		{"no next hop", ownerIPIP, kr(80), false, "no next-hop"},
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
