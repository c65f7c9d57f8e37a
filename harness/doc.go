// Package harness builds and drives birdcage's clusters: network
// namespaces per node and router, a route programmer and a BIRD per node,
// probes and route timelines, and the actions a scenario takes (upgrades,
// BIRD stops and starts, config changes).
//
// A *Cluster is the lifecycle and the Target (target.go) a claim is judged
// on; the rest of its surface is in facets, one per room:
//
//   - c.Datastore(): the datastore as an operator and IPAM change it
//     (datastore.go);
//   - c.Fabric(): the BGP-speaking routers (ToRs), the actions on them, and
//     the planes and uplinks a hop table reads (fabric.go);
//   - c.Measure(): what the processes did and cost — programmer restarts,
//     confd reactions and handovers, BIRD releases, memory, the host's
//     neighbour table, probe progress, netlink route traces (figures.go and
//     the files of each reading);
//   - c.Captures(): packet captures of the probe traffic (capture.go).
//
// birdcage's confd (the render-and-reconfigure loop) is confdLoop
// (confdwatch.go). What reads only the topology and a probe report — the
// IPIP encapsulation check — is harness/encap.
//
// The results model is report/results; the probe report's data types are
// instrument/probe/report and a route timeline event's
// instrument/timeline/event. docs/layout.md says which room owns what.
//
// The judges (route, probe and timeline matchers, the platform-loss rule
// and hole counter, handovers, hop tables, the flow plan, the sweep's
// slope verdict) are harness/judge, which reads a cluster through small
// interfaces that *Node and *Cluster satisfy (judging.go) and does not
// import this package.
package harness
