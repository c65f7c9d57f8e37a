// Package lab attaches birdcage's measurement to a cluster birdcage did not
// build — a kind cluster running calico-node, a vagrant fleet, a hand-made
// set of namespaces — described by a lab manifest (manifest.go).
//
// It owns the manifest (strict YAML, errors naming file, field and valid
// values), resolving each node's and workload's network namespace (a path,
// or a container's PID through its runtime), running the manifest's action
// commands as events on the harness's monotonic clock, and the attach mode:
// route timelines, probe traffic and BPF counters inside the lab's
// namespaces, all removed afterwards, with a before/after comparison of
// every namespace it touched so the lab is left exactly as found.
//
// It must not create, configure or delete anything in the lab beyond what
// measuring needs (probe sockets, BPF links, netlink monitors): no links,
// addresses, routes or qdiscs of its own that outlive the attach. It never
// builds a topology (that is topo/) and never starts node software (the
// manifest's commands do).
package lab
