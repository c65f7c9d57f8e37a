// Package routetable reconciles desired routes (dataplane/route) into the
// kernel's main routing table of one network namespace, the way Felix's
// route table does for cluster routes:
//
//   - Every desired route is written with RouteReplace at metric 0 with the
//     configured protocol (DeviceRouteProtocol, default 80). A replace is one
//     kernel operation, so a route another component left for the same
//     destination and metric (BIRD's `proto bird`) becomes ours with no
//     moment without a route.
//   - Between full resyncs the table trusts its own record of what it wrote
//     (as Felix does); Resync re-reads the kernel and fixes drift, and is
//     also what finds routes left by others.
//   - An OwnershipPolicy decides which kernel routes are ours, and so may be
//     deleted when not desired: our protocol on our devices (the tunnel
//     device, workload interfaces, the node's uplinks); and, only when the
//     programmer owns the IPIP cluster routes and the release has the rule,
//     `proto bird` routes all of whose next hops are the tunnel device. That
//     rule has no time bound and is not scoped by destination; it never
//     takes other protocols on the tunnel device, nor `proto bird` on any
//     other device.
//   - A route of ours at another metric than 0 (for example one that was
//     written while a different metric was configured) is not desired, so it
//     is deleted: the kernel keys routes by destination, TOS and metric.
//   - Deletes name our protocol, so a delete never removes a route that
//     another component has replaced in the meantime.
//
// Writes go out pipelined on a netlink socket of the table's own (writer.go):
// up to a window of RTM_NEWROUTE/RTM_DELROUTE requests per send, each
// acknowledged and matched back to its route by sequence number, so a pass
// costs about what the kernel's own work costs (BenchmarkRoutes10k compares
// it with `ip -batch` in the same run). Dumps use the netlink library.
//
// Netlink errors are returned per route, logged, and retried by the caller;
// they never panic or stop the table.
//
// It does not create, configure or watch devices (topo/ owns tunl0, uplinks
// and workload veths), and it must not import harness/ or scenarios/.
package routetable
