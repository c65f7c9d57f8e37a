// These root tests hold the route table's kernel behaviour in place, in a
// throwaway network namespace:
//  1. RouteReplace takes a wanted destination from BIRD in one operation:
//     a route monitor sees no delete for that prefix.
//  2. A stray `proto bird` route via tunl0 is removed within one resync when
//     the programmer owns IPIP (3.33), and kept when it does not or when the
//     release has no claim rule; other protocols on tunl0, proto bird on
//     other devices and our protocol on foreign devices are never touched.
//  3. A delete carrying `proto bird` does not remove our route.
//  4. Drift in our routes is fixed at the next resync; multipath, IPv6 and
//     device routes round-trip without spurious rewrites.
package routetable

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/route"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

var (
	nodeGW = netip.MustParseAddr("10.0.1.12")
	bgpGW  = netip.MustParseAddr("10.0.2.1")
)

func tunnelRoute(dst string) route.Route {
	return route.Route{Dst: netip.MustParsePrefix(dst), Class: route.ClassIPIPTunnel, Reason: "test",
		NextHops: []route.NextHop{{Gateway: nodeGW, Device: "tunl0", OnLink: true}}}
}

func ownerPolicy() OwnershipPolicy {
	return NewOwnershipPolicy(80, "tunl0", []string{"eth0", "eth1"}, config.EnabledIPIPOnly, config.R333)
}

func TestReplaceTakesBIRDRouteWithoutDelete(t *testing.T) {
	tn := newTestNode(t)
	t.Logf("real ipip tunl0: %v", tn.realIPIP)
	const dst = "10.65.2.0/26"
	// 1. BIRD's persisted route for a destination the programmer wants.
	tn.addRoute(t, dst, "10.0.1.12", "tunl0", int(kroute.ProtoBIRD), 0, true)

	// 2. Watch every route change in the node's netns.
	updates := make(chan netlink.RouteUpdate, 1024)
	done := make(chan struct{})
	defer close(done)
	nsh := netns.NsHandle(tn.ns.Fd())
	if err := netlink.RouteSubscribeWithOptions(updates, done, netlink.RouteSubscribeOptions{Namespace: &nsh}); err != nil {
		t.Fatalf("subscribe to route updates: %v", err)
	}

	// 3. The programmer takes it.
	tb := tn.table(t, ownerPolicy(), testLog(t))
	tb.SetDesired([]route.Route{tunnelRoute(dst)})
	st, err := tb.Apply()
	if err != nil || st.Replaced != 1 || st.Failed != 0 {
		t.Fatalf("apply: %+v, %v; want one replace", st, err)
	}

	// 4. The monitor sees the new proto 80 route and, before it, no delete.
	p := netip.MustParsePrefix(dst)
	deadline := time.After(5 * time.Second)
	for {
		select {
		case u := <-updates:
			if u.Dst == nil || u.Dst.String() != p.String() {
				continue
			}
			if u.Type == unix.RTM_DELROUTE {
				t.Fatalf("RTM_DELROUTE seen for %s (proto %d): the takeover was not atomic", dst, u.Protocol)
			}
			if u.Type == unix.RTM_NEWROUTE && u.Protocol == 80 {
				goto taken
			}
		case <-deadline:
			t.Fatalf("no RTM_NEWROUTE proto 80 for %s within 5s", dst)
		}
	}
taken:
	rs := tn.routes(t, dst)
	if len(rs) != 1 || rs[0].Protocol != 80 {
		t.Fatalf("after takeover: %v; want exactly one proto 80 route", rs)
	}
}

func TestStrayBIRDTunnelRoutes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  OwnershipPolicy
		removed bool
	}{
		{"owner of IPIP, 3.33: removed", ownerPolicy(), true},
		{"not owner of IPIP, 3.33: kept", NewOwnershipPolicy(80, "tunl0", []string{"eth0", "eth1"}, config.EnabledNoEncapOnly, config.R333), false},
		{"owner of IPIP, 3.32: kept", NewOwnershipPolicy(80, "tunl0", []string{"eth0", "eth1"}, config.Enabled, config.R332), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTestNode(t)
			// 1. The leftovers of a BIRD that never came back, and bystanders.
			tn.addRoute(t, "10.65.9.0/26", "10.0.1.13", "tunl0", int(kroute.ProtoBIRD), 0, true) // stray: block released
			tn.addRoute(t, "10.65.8.0/26", "10.0.1.13", "tunl0", unix.RTPROT_STATIC, 0, true)    // other protocol on tunl0
			tn.addRoute(t, "10.67.9.0/26", "10.0.1.13", "eth0", int(kroute.ProtoBIRD), 0, false) // proto bird elsewhere
			tn.addRoute(t, "10.68.9.0/26", "10.9.0.2", "ext0", unix.RTPROT_BOOT, 0, false)       // boot (Felix's default DeviceRouteProtocol) on a foreign device

			// 2. One resync with nothing desired.
			tb := tn.table(t, tc.policy, testLog(t))
			st, err := tb.Resync()
			if err != nil {
				t.Fatalf("resync: %v", err)
			}
			stray := tn.routes(t, "10.65.9.0/26")
			if tc.removed && len(stray) != 0 {
				t.Errorf("stray proto bird route via tunl0 still present after one resync: %v", stray)
			}
			if !tc.removed && len(stray) != 1 {
				t.Errorf("stray proto bird route via tunl0 removed although not claimed: %v (stats %+v)", stray, st)
			}
			for _, dst := range []string{"10.65.8.0/26", "10.67.9.0/26", "10.68.9.0/26"} {
				if rs := tn.routes(t, dst); len(rs) != 1 {
					t.Errorf("bystander %s touched: %v", dst, rs)
				}
			}
			wantDeleted := 0
			if tc.removed {
				wantDeleted = 1
			}
			if st.Deleted != wantDeleted || st.Failed != 0 {
				t.Errorf("stats %+v; want %d deleted, none failed", st, wantDeleted)
			}
		})
	}
}

func TestBIRDDeleteDoesNotRemoveOurRoute(t *testing.T) {
	tn := newTestNode(t)
	const dst = "10.65.2.0/26"
	tn.addRoute(t, dst, "10.0.1.12", "tunl0", int(kroute.ProtoBIRD), 0, true)
	tb := tn.table(t, ownerPolicy(), testLog(t))
	tb.SetDesired([]route.Route{tunnelRoute(dst)})
	if st, err := tb.Apply(); err != nil || st.Replaced != 1 {
		t.Fatalf("apply: %+v %v", st, err)
	}
	// BIRD withdraws the route it believes it still has: a delete naming
	// its protocol, any scope.
	birdDelete := func(dst string) error {
		_, ipn, _ := net.ParseCIDR(dst)
		return tn.h.RouteDel(&netlink.Route{Dst: ipn, Protocol: netlink.RouteProtocol(kroute.ProtoBIRD), Scope: netlink.SCOPE_NOWHERE})
	}
	// Positive control: the same delete does remove a proto bird route.
	tn.addRoute(t, "10.65.3.0/26", "10.0.1.13", "tunl0", int(kroute.ProtoBIRD), 0, true)
	if err := birdDelete("10.65.3.0/26"); err != nil {
		t.Fatalf("positive control: BIRD's delete of its own route failed: %v", err)
	}
	err := birdDelete(dst)
	if !errors.Is(err, unix.ESRCH) {
		t.Errorf("delete proto bird: got %v, want ESRCH (no such route)", err)
	}
	if rs := tn.routes(t, dst); len(rs) != 1 || rs[0].Protocol != 80 {
		t.Errorf("our route after BIRD's delete: %v", rs)
	}
}

func TestResyncFixesDriftAndRoundTrips(t *testing.T) {
	tn := newTestNode(t)
	desired := []route.Route{
		tunnelRoute("10.65.2.0/26"),
		{Dst: netip.MustParsePrefix("10.66.2.0/26"), Class: route.ClassIPIPSameSubnet, NextHops: []route.NextHop{{Gateway: nodeGW, Device: "eth0"}}},
		{Dst: netip.MustParsePrefix("10.67.3.0/26"), Class: route.ClassNoEncap, NextHops: []route.NextHop{
			{Gateway: netip.MustParseAddr("10.0.1.1"), Device: "eth0"}, {Gateway: bgpGW, Device: "eth1"}}},
		{Dst: netip.MustParsePrefix("fd00:67:0:2::/122"), Class: route.ClassNoEncap, NextHops: []route.NextHop{{Gateway: netip.MustParseAddr("fd00:1::12"), Device: "eth0"}}},
		{Dst: netip.MustParsePrefix("10.65.1.5/32"), Class: route.ClassLocalWorkload, NextHops: []route.NextHop{{Device: "ext0p"}}},
		// IPv6 has no route scopes: the kernel reports this device route as
		// universe, and it must still read back as unchanged.
		{Dst: netip.MustParsePrefix("fd00:65:0:1::5/128"), Class: route.ClassLocalWorkload, NextHops: []route.NextHop{{Device: "ext0p"}}},
	}
	pol := ownerPolicy()
	pol.WorkloadPrefixes = append(pol.WorkloadPrefixes, "ext0p") // stand-in workload iface (tunl0p exists only without ipip)
	tb := tn.table(t, pol, testLog(t))
	tb.SetDesired(desired)
	st, err := tb.Apply()
	if err != nil || st.Added != len(desired) || st.Failed != 0 {
		t.Fatalf("first apply: %+v %v", st, err)
	}
	// A fresh table reading the kernel finds every route exactly as desired.
	fresh := tn.table(t, pol, testLog(t))
	fresh.SetDesired(desired)
	if st, err := fresh.Resync(); err != nil || st.Unchanged != len(desired) || st.Added+st.Replaced+st.Deleted != 0 {
		t.Fatalf("resync of unchanged routes rewrote something: %+v %v", st, err)
	}
	if st.Owned != len(desired) {
		t.Errorf("owned = %d, want %d", st.Owned, len(desired))
	}

	// Drift: someone deletes one of ours and rewrites another.
	_, ipn, _ := net.ParseCIDR("10.65.2.0/26")
	if err := tn.h.RouteDel(&netlink.Route{Dst: ipn, Protocol: 80}); err != nil {
		t.Fatal(err)
	}
	tn.addRoute(t, "10.65.2.0/26", "10.0.1.99", "tunl0", 80, 0, true)
	_, ipn, _ = net.ParseCIDR("10.66.2.0/26")
	if err := tn.h.RouteDel(&netlink.Route{Dst: ipn, Protocol: 80}); err != nil {
		t.Fatal(err)
	}
	// Apply trusts its record (like Felix between refreshes)...
	if st, err := tb.Apply(); err != nil || st.Added+st.Replaced != 0 {
		t.Errorf("apply without resync should not notice drift: %+v %v", st, err)
	}
	// ...and a resync fixes both.
	st, err = tb.Resync()
	if err != nil || st.Replaced != 1 || st.Added != 1 {
		t.Errorf("resync after drift: %+v %v; want one replace and one add", st, err)
	}
	if rs := tn.routes(t, "10.65.2.0/26"); len(rs) != 1 || rs[0].NextHops[0].Gateway != nodeGW {
		t.Errorf("drifted route not fixed: %v", rs)
	}

	// A route of ours at another metric is not desired: it is deleted.
	tn.addRoute(t, "10.65.2.0/26", "10.0.1.12", "tunl0", 80, 32, true)
	if st, err := tb.Resync(); err != nil || st.Deleted != 1 {
		t.Errorf("resync with our route at metric 32: %+v %v; want it deleted", st, err)
	}

	// Nothing desired any more: all ours go, nothing else does.
	tb.SetDesired(nil)
	if st, err := tb.Apply(); err != nil || st.Deleted != len(desired) || st.Owned != 0 {
		t.Errorf("apply with nothing desired: %+v %v", st, err)
	}
}

func TestMissingDeviceIsRetriedNotFatal(t *testing.T) {
	tn := newTestNode(t)
	tb := tn.table(t, ownerPolicy(), testLog(t))
	r := route.Route{Dst: netip.MustParsePrefix("10.65.1.7/32"), Class: route.ClassLocalWorkload,
		NextHops: []route.NextHop{{Device: "cali-late"}}}
	tb.SetDesired([]route.Route{r, tunnelRoute("10.65.2.0/26")})
	st, err := tb.Apply()
	if err != nil || st.Failed != 1 || st.Added != 1 || !errors.Is(st.Errors[0], ErrDeviceMissing) {
		t.Fatalf("apply with a missing device: %+v %v", st, err)
	}
	if err := tn.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cali-late"}, PeerName: "cali-late-p"}); err != nil {
		t.Fatal(err)
	}
	l, _ := tn.h.LinkByName("cali-late")
	_ = tn.h.LinkSetUp(l)
	if st, err := tb.Apply(); err != nil || st.Added != 1 || st.Failed != 0 {
		t.Errorf("retry once the device exists: %+v %v", st, err)
	}
}

// The TakeoverGap fault opens exactly the window it is asked for: BIRD's
// route at the programmer's key is deleted, and the programmer's own comes
// no sooner than the gap later. Specs use it to show the upgrade gate
// catches a programmer that stops replacing in one operation; its positive
// control is TestReplaceTakesBIRDRouteWithoutDelete (no gap, no delete).
func TestTakeoverGapFaultOpensAWindow(t *testing.T) {
	tn := newTestNode(t)
	const dst = "10.65.2.0/26"
	const gap = 100 * time.Millisecond
	tn.addRoute(t, dst, "10.0.1.12", "tunl0", int(kroute.ProtoBIRD), 0, true)
	updates := make(chan netlink.RouteUpdate, 1024)
	done := make(chan struct{})
	defer close(done)
	nsh := netns.NsHandle(tn.ns.Fd())
	if err := netlink.RouteSubscribeWithOptions(updates, done, netlink.RouteSubscribeOptions{Namespace: &nsh}); err != nil {
		t.Fatalf("subscribe to route updates: %v", err)
	}
	// Stamp each update as it arrives, beside the Apply that sleeps.
	type stamped struct {
		u  netlink.RouteUpdate
		at time.Time
	}
	seen := make(chan stamped, 1024)
	go func() {
		for u := range updates {
			seen <- stamped{u, time.Now()}
		}
	}()
	tb := tn.table(t, ownerPolicy(), testLog(t))
	o := tb.Options()
	o.TakeoverGap = gap
	tb.SetOptions(o)
	tb.SetDesired([]route.Route{tunnelRoute(dst)})
	if st, err := tb.Apply(); err != nil || st.Replaced != 1 {
		t.Fatalf("apply: %+v, %v; want one replace", st, err)
	}
	var deleted time.Time
	deadline := time.After(5 * time.Second)
	for {
		select {
		case s := <-seen:
			u := s.u
			if u.Dst == nil || u.Dst.String() != dst {
				continue
			}
			switch {
			case u.Type == unix.RTM_DELROUTE && u.Protocol == unix.RTPROT_BIRD:
				deleted = s.at
			case u.Type == unix.RTM_NEWROUTE && u.Protocol == 80:
				if deleted.IsZero() {
					t.Fatalf("the programmer's route came with no delete of BIRD's before it: no window was opened")
				}
				if w := s.at.Sub(deleted); w < gap-10*time.Millisecond {
					t.Fatalf("window %v, want at least the %v asked for", w, gap)
				}
				return
			}
		case <-deadline:
			t.Fatalf("no takeover of %s within 5s", dst)
		}
	}
}
