// Package layout states the project's rooms (its top-level directories) and
// the order they may import each other in. It holds no code: its test walks
// the tree and fails on an import that points up, so the layering
// docs/layout.md describes is kept by the build, not by review.
//
// From the bottom: internal (process edges, kernel types, clocks), bpf (the
// probe's eBPF objects), topo (topologies in namespaces), dataplane (what
// runs on a node: the programmer, BIRD, confd, the calico/node pod and the
// timing model of them), instrument (what watches a node: probes, the route
// timeline, captures, BGP staging), report (results files and what reads
// them), harness (a cluster's life, its judges, labs), and on top the
// programs and suites (cmd, ci, scenarios).
package layout

// Rank is each room's height: a package may import its own room and any
// room of a lower rank, never a higher one.
var Rank = map[string]int{
	"internal":   0,
	"bpf":        1,
	"topo":       2,
	"dataplane":  3,
	"instrument": 4,
	"report":     5,
	"harness":    6,
	"cmd":        7,
	"ci":         7,
	"scenarios":  7,
}

// MaxShare is the most of the project's non-test lines one room may hold:
// past it a room is doing more than one job.
const MaxShare = 0.35
