// Package calc computes, from one read of the datastore, the routes this
// node's programmer wants in the kernel: a route to every remote node's IPAM
// block in a pool class the programmer owns, a /32 or /128 for every workload
// address that its block's route would send to the wrong node (borrowed
// addresses, and addresses in no block), and a device route for every local
// workload.
//
// It is pure: no netlink, no files, no clock. Ownership comes in as the
// effective programClusterRoutes value and is read only through its accessors
// in internal/calico/config; routes of a class the programmer does not own are not
// desired (they are BIRD's).
//
// Where this differs from the real Felix, it is deliberate and opt-in only:
// Options.NoEncapMultipathViaGateways is NOT Felix's behaviour (Felix sends
// an indirectly connected no-encap destination through a single gateway,
// losing dual-ToR "dual-ness"); it exists to evaluate a candidate fix.
//
// It must not import harness/, scenarios/ or netlink.
package calc
