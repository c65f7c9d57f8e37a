package judge

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/birdcage/birdcage/instrument/probe/report"
)

// FlowPlan is which flows a probe session carries on a cluster too large
// for EveryNodePair (N nodes: N(N−1) flows, 9900 at 100 nodes). Every flow
// to and from the nodes under change — between a focus node's first
// workload and every other node's, both ways — plus a sample of the flows
// among the other nodes, drawn without replacement with a fixed seed, so the
// plan is the same on every run. The sample is the control: a change
// confined to the focus nodes shows no loss there. String states the plan
// for the report.
type FlowPlan struct {
	Focus   []string      `json:"focus"`
	Sampled int           `json:"sampled"`     // flows drawn among the other nodes
	Among   int           `json:"sampledFrom"` // how many there were to draw from
	Seed    uint64        `json:"seed"`
	Flows   []report.Flow `json:"-"`
	// FocusFlows is how many of Flows touch a focus node (they come first).
	FocusFlows int `json:"focusFlows"`
}

// NodeEndpoint is a node's first workload as a probe endpoint: what a flow
// plan draws flows between.
type NodeEndpoint struct {
	Node     string
	Endpoint report.Endpoint
}

// PlanFlows plans the flows for a change to the focus nodes among nodes (in
// node order, each with its first workload), with sample flows (at most)
// drawn among the rest. A sample of 0 gives focus flows only; a sample at
// least as large as the rest gives every pair.
func PlanFlows(nodes []NodeEndpoint, focus []string, sample int, seed uint64) (FlowPlan, error) {
	p := FlowPlan{Focus: slices.Clone(focus), Seed: seed}
	eps := map[string]report.Endpoint{}
	var order []string
	for _, n := range nodes {
		eps[n.Node] = n.Endpoint
		order = append(order, n.Node)
	}
	isFocus := map[string]bool{}
	for _, f := range focus {
		if _, ok := eps[f]; !ok {
			return FlowPlan{}, fmt.Errorf("flow plan: focus node %q has no workload (nodes with workloads: %s)", f, strings.Join(order, ", "))
		}
		isFocus[f] = true
	}
	var rest []report.Flow
	for _, a := range order {
		for _, b := range order {
			switch {
			case a == b:
			case isFocus[a] || isFocus[b]:
				p.Flows = append(p.Flows, report.Flow{Src: eps[a], Dst: eps[b]})
			default:
				rest = append(rest, report.Flow{Src: eps[a], Dst: eps[b]})
			}
		}
	}
	p.FocusFlows = len(p.Flows)
	p.Among = len(rest)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	r.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	p.Sampled = min(max(sample, 0), len(rest))
	picked := rest[:p.Sampled]
	slices.SortFunc(picked, func(x, y report.Flow) int { return strings.Compare(x.Name(), y.Name()) })
	p.Flows = append(p.Flows, picked...)
	return p, nil
}

// String states the plan: "all 38 flows to and from node-3, plus 16 of the
// 342 flows among the other 19 nodes (sampled, seed 1): 54 flows".
func (p FlowPlan) String() string {
	return fmt.Sprintf("all %d flows to and from %s, plus %d of the %d flows among the other nodes (sampled, seed %d): %d flows",
		p.FocusFlows, strings.Join(p.Focus, ", "), p.Sampled, p.Among, p.Seed, len(p.Flows))
}
