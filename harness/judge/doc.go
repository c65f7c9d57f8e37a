// Package judge holds birdcage's verdicts: the route matchers
// (HaveClusterRoute, HaveRemoteBlockRoutes, BeExportedTo, who owns a route),
// the probe matchers (HaveNoGap), the one rule for judging a change's loss
// against the platform's own (PlatformLossOf, BeWithinPlatformLoss, the hole
// counter), route-timeline matchers (KeepRouteThroughout), handovers, hop
// tables, the flow plan and the restart-delay sweep's slope verdict — the
// equivalent of Calico FV's connectivity checker: declare what must hold,
// check it once.
//
// It judges data: probe reports (instrument/probe/report), route timeline
// answers (instrument/timeline/event), kernel routes (internal/kroute) and the
// results model (report/results). Where it needs a node or a cluster it
// takes a small interface (RouteSource, ExportSource, WorkloadHost,
// BlockRouteSource, Timeline, Fabric) that *harness.Node, *harness.Cluster
// and *timeline.Monitor satisfy. It must not import the harness root, BIRD's
// control, netlink or BPF, and must not change a cluster: a judge only reads.
package judge
