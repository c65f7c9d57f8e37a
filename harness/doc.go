// Package harness builds and drives birdcage's clusters: network
// namespaces per node and router, a route programmer and a BIRD per node,
// probes and route timelines, and the actions a scenario takes (upgrades,
// BIRD stops and starts, config changes).
//
// The results model (the results file and its rows, verdicts, figure
// kinds, stats, sweeps, budgets, tables) is harness/results, a leaf that
// the tools reading results files import alone. This package keeps type
// aliases and thin forwards for it (harness.ScenarioResult,
// harness.NewTable, …) so the scenarios compile unchanged; new code
// imports harness/results directly. Likewise the probe report's data
// types are harness/probe/report, a route timeline event's
// harness/timeline/event, and the netlink route conversion
// internal/kroute/nlroute.
//
// The judges (route, probe and timeline matchers, the platform-loss rule
// and hole counter, handovers, hop tables, the flow plan, the sweep's
// slope verdict) are harness/judge, which reads a cluster through small
// interfaces that *Node and *Cluster satisfy (judging.go) and does not
// import this package.
package harness
