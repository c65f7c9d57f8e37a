package scenarios_test

// Verdicts that rest on how upstream BIRD writes the kernel (issue 43).
// birdcage runs upstream BIRD (2.0 by default); Calico ships a BIRD 1.6
// fork, read at projectcalico/bird 1e2ff99d (results.ForkCommit; Calico
// pins v0.3.3-211-g9111ec3c, three commits later, not to be had here).
// What the fork does, from its source at that commit:
//
//   - sysdep/linux/netlink.c krt_replace_rte: a changed route is deleted
//     (RTM_DELROUTE naming proto bird and, its sys.metric being 0, no
//     priority: a wildcard on IPv4) and then added with
//     NLM_F_CREATE|NLM_F_EXCL, never NLM_F_REPLACE ("route replace on
//     Linux has some problems"). Upstream since 2feaa693 (2016, in 1.6.x):
//     Debian's 1.6.8 does the same.
//   - nl_send_route: krt_tunnel is applied only to a single-path route
//     (case RTD_ROUTER, with tunl0 found by name); a multipath route
//     (RTD_MULTIPATH) is written by nl_add_multipath with its BGP next
//     hops as they are. Fork-only (9da21492, 205aa82f).
//   - nl_send_route: with krt_tunnel set but no tunl0 (if_find_by_name
//     fails) the route is written via its BGP next hop on the uplink,
//     unencapsulated; sysdep/unix/krt.c krt_got_route marks it for update
//     at the next scan that finds tunl0 (fork-only, 79a25f8e, 93d06e2d).
//   - nest/rt-table.c rta_apply_hostentry: a next hop that resolves to
//     nothing makes the route RTD_UNREACHABLE, which the kernel protocol
//     writes as an `unreachable` route (upstream 1.6 the same).
//   - sysdep/unix/krt.c krt_got_route/krt_same_dest: a scanned route is
//     judged by gateway and interface (and the tunnel), never by metric; a
//     second route to the same net is "already seen" and left alone
//     (upstream 1.6 the same, the interface check fork-only, 0d986b66).
//
// Each dependence below is one of these, as the rows that carry it say.

import birdresults "github.com/birdcage/birdcage/report/results"

var (
	// The take-back of a double-programmed route, and the flaps of one.
	upstreamReplaceTakesKey = birdresults.BIRDDependence{
		Behaviour: "BIRD 2 rewrites a route it changes with one NLM_F_REPLACE, which takes the key from the programmer's proto 80 route at the same metric",
		Fork:      "deletes its own route (RTM_DELROUTE naming proto bird, which removes nothing of the programmer's) and adds with NLM_F_EXCL, refused \"File exists\" while the programmer's route holds the key (sysdep/linux/netlink.c krt_replace_rte)",
		Differs:   "BIRD never takes the key back from the programmer: no take-back, and a double-programmed route does not flap to BIRD when routes change",
		OnBIRD16:  true,
	}
	// No windows at peers when a graceful restart ends.
	upstreamReplaceNoWindow = birdresults.BIRDDependence{
		Behaviour: "BIRD 2 installs a refreshed route with one NLM_F_REPLACE, so a peer is never without it",
		Fork:      "deletes the old route and then adds the new one (sysdep/linux/netlink.c krt_replace_rte)",
		Differs:   "each peer whose route's attributes change is without a route for a moment between the delete and the add (0.003-1.05 ms measured with peers on 1.6, releases_upgrade_test.go)",
		OnBIRD16:  true,
	}
	// IPIP + ECMP with BIRD owning IPIP.
	upstreamTunnelPerPath = birdresults.BIRDDependence{
		Behaviour: "upstream BIRD 2's kernel filter (`onlink = true; ifname = \"tunl0\"; gw = bgp_next_hop`) runs per path before `merge paths`, so every next hop of a multipath route is `dev tunl0 onlink` via a node's address",
		Fork:      "applies krt_tunnel only to a single-path route (nl_send_route, case RTD_ROUTER) and writes a multipath route with its BGP next hops as they are (case RTD_MULTIPATH, nl_add_multipath): via the ToRs, unencapsulated",
		Differs:   "a block learnt over both planes is a plain multipath route via the ToRs: probes leave unencapsulated and arrive only where the fabric routes the pool; the IPIP+ECMP verdict measured here (every probe lost) is upstream BIRD 2's, not the fork's",
	}
	// The 3.31 BIRD's metric-0 route left beneath the 3.33 BIRD's.
	upstreamMetricInScan = birdresults.BIRDDependence{
		Behaviour: "upstream BIRD 2.0 wrote the 3.33 route at its krt_metric beside the 3.31 BIRD's persisted metric-0 route and left that one (measured here)",
		Fork:      "judges a scanned route by gateway and interface, never by metric (sysdep/unix/krt.c krt_got_route, krt_same_dest), takes a second route to the net as \"already seen\", and deletes with no priority (a wildcard on IPv4)",
		Differs:   "the metric-0 route is not told from its own by metric; upstream BIRD 1.6.8, which scans the same way, left no route beneath in 3 of 3 no-encap round trips where 2.0.12 left 2 in 3 of 3 (roundtrip_test.go, its BIRD 1.6 entry)",
		OnBIRD16:  true,
	}
)
