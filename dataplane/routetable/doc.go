// Package routetable reconciles desired routes (dataplane/route) into the
// kernel's main routing table of one network namespace, the way Felix's
// route table does in 3.31, 3.32 and 3.33 (felix/routetable/route_table.go;
// the facts and commits are in docs/conformance-programmer.md):
//
//   - The kernel keys a route by destination, TOS and metric, and so does
//     the table. Every desired route is written with RouteReplace at metric
//     0 for IPv4 and 1024 for IPv6 (the request names 1024, as Felix's
//     does), with the configured protocol (80 by default). A replace takes
//     another component's route only at the same key: BIRD's IPv4 route at
//     metric 0 (3.31) becomes ours in one operation; at 1024 (BIRD from
//     3.32 on) our replace adds a second route beside it.
//   - One pass sends every delete before any replace (Felix's "first clean
//     up any old routes"); Options.WriteOrder turns that round. Deletes name
//     the key with protocol 0, which matches any protocol, as Felix's do;
//     Options.DeleteNamesProtocol makes them name the route's protocol.
//   - IPIP tunnel routes carry Options.TunnelMTU (Felix: host MTU - 20).
//   - Between full resyncs the table trusts its own record of what it wrote
//     (as Felix does); Resync re-reads the kernel and fixes drift, and is
//     also what finds routes left by others.
//   - An OwnershipPolicy decides which kernel routes are ours, and so are
//     deleted when not desired: in the Calico releases, any main-table route
//     with our protocol, on any device (Felix's exclusive protocol); else
//     (ProtocolOnAnyDevice off) our protocol on our devices only. And, only
//     when the programmer owns the IPIP cluster routes and the release is
//     3.33, `proto bird` routes whose one next hop is the tunnel device.
//     That rule has no time bound and is not scoped by destination; it
//     never takes other protocols on the tunnel device, nor `proto bird` on
//     any other device or multipath.
//   - A route of ours (or a claimed one) at another key than the desired
//     one is not desired, so it is deleted. With delete-first, a 3.33
//     programmer that meets a 3.32 BIRD's route at 1024 deletes it before it
//     adds its own at 0: each such block has a moment without a route
//     (TestUpgradeWindowDeleteFirst measures it).
//
// Writes go out on a netlink socket of the table's own (writer.go). The
// Calico release profiles send one request at a time and wait for each
// answer, as Felix does (Options.WriteWindow 1); otherwise they go out
// pipelined, up to a window of RTM_NEWROUTE/RTM_DELROUTE requests per
// send, each acknowledged and matched back to its route by sequence
// number, so a pass
// costs about what the kernel's own work costs (BenchmarkRoutes10k compares
// it with `ip -batch` in the same run). Dumps use the netlink library.
//
// Netlink errors are returned per route, logged, and retried by the caller;
// they never panic or stop the table.
//
// It does not create, configure or watch devices (topo/ owns tunl0, uplinks
// and workload veths), and it must not import harness/ or scenarios/.
package routetable
