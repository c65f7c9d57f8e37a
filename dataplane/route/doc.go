// Package route defines the one value the route calculation produces and the
// route table consumes: a desired kernel route, with its class (why it
// exists: local workload, IPIP tunnel, IPIP same-subnet, no-encap) and its
// next hops (one, or several for a multipath route).
//
// It owns no behaviour beyond formatting and comparison. It must not import
// netlink, the datastore, harness/ or scenarios/.
package route
