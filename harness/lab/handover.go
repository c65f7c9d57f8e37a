package lab

import (
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/kroute"
)

// Handovers is harness.Cluster.Handovers for a lab, from its route
// timelines alone: when the lab's BIRD was reconfigured and when its
// programmer restarted are not seen, so "BIRD tried first" cannot be told
// from "the programmer deleted first" and the scan prediction is not made.
func (l *Lab) Handovers(from, to kroute.Protocol, toOwner judge.Owner, start, end int64) judge.Handovers {
	var nodes []judge.HandoverNode
	for _, n := range l.Nodes {
		nodes = append(nodes, judge.HandoverNode{Name: n.Name, Timeline: l.Timeline(n.Name), Blocks: l.RemoteBlocks(n.Name)})
	}
	return judge.ReadHandovers(nodes, judge.HandoverChange{From: from, To: to, ToBIRD: toOwner == judge.ByBIRD, Start: start, End: end})
}
