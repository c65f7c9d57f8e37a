// Package report is a probe session's report as data: per flow what was
// sent, lost, late and duplicated, the longest gap, delivery over time and
// the disruptions; and the flows a session carries (Endpoint, Flow), so a
// flow plan is data too. instrument/probe measures and builds it (and aliases these
// types); the results model (report/results) and the tools that read
// results files import only this package, without BPF.
package report

import "net/netip"

// Report is a probe session's result. All times are monotonic ns
// (internal/monoclock), comparable with route timeline events.
type Report struct {
	StartNs int64 `json:"startNs"`
	EndNs   int64 `json:"endNs"`
	Rate    int   `json:"rate"` // probes per second per flow
	// SenderRealtime says whether the send loop got SCHED_FIFO.
	SenderRealtime bool        `json:"senderRealtime"`
	Marks          []Mark      `json:"marks,omitempty"`
	Flows          []GapReport `json:"flows"`
	Total          Total       `json:"total"`
	// Tunnels are the IPIP packets (outer protocol 4, every flow's
	// together) each hop counted, by outer source and destination: what
	// says an inner packet crossed the underlay between the two nodes'
	// addresses. Read after the flows, so a live report never shows
	// fewer outer packets than the inner ones it counted.
	Tunnels []TunnelCount `json:"tunnels,omitempty"`
}

// Total aggregates every flow.
type Total struct {
	Flows          int     `json:"flows"`
	FlowsWithLoss  int     `json:"flowsWithLoss"`
	Sent           uint64  `json:"sent"`
	Received       uint64  `json:"received"`
	Lost           int64   `json:"lost"`
	LongestGapMs   float64 `json:"longestGapMs"`
	LongestGapFlow string  `json:"longestGapFlow,omitempty"`
	// Late and Duplicates sum the flows' reordered and duplicated probes;
	// SenderPauseInGapMs is the longest gap flow's own sender pause.
	Late               uint64  `json:"late"`
	Duplicates         uint64  `json:"duplicates"`
	MaxReorderDepth    uint64  `json:"maxReorderDepth"`
	SenderPauseInGapMs float64 `json:"senderPauseInGapMs"`
}

// GapReport is what happened to one flow's probes.
type GapReport struct {
	Flow    string     `json:"flow"` // "src->dst"
	SrcAddr netip.Addr `json:"srcAddr"`
	DstAddr netip.Addr `json:"dstAddr"`

	// Sent counts probes the kernel accepted; SendErrors counts refused
	// sends by errno name (ECONNREFUSED, EHOSTUNREACH, EAGAIN, ...).
	Sent       uint64            `json:"sent"`
	SendErrors map[string]uint64 `json:"sendErrors,omitempty"`
	// Received is distinct probes seen by BPF at the destination
	// workload's interface ingress. Lost = Sent - Received.
	Received uint64 `json:"received"`
	Lost     int64  `json:"lost"`
	Missing  uint64 `json:"missing"` // sequence numbers never seen below the highest
	// FirstSeq and HighestSeq are the first probe that arrived and the
	// highest one (sequence numbers start at 1): probes before FirstSeq
	// never arrived; those after HighestSeq are in flight or lost.
	FirstSeq   uint64 `json:"firstSeq,omitempty"`
	HighestSeq uint64 `json:"highestSeq,omitempty"`
	// Late counts probes that arrived after a higher sequence number had
	// (reordered); Duplicates counts probes seen again within 64 sequence
	// numbers of the highest. Both from the BPF tracker at the destination.
	Late       uint64 `json:"late"`
	Duplicates uint64 `json:"duplicates"`
	// ReorderDepth is how far behind the highest sequence number the most
	// out-of-order late probe arrived (0: none reordered).
	ReorderDepth uint64 `json:"reorderDepth"`

	// LongestGapMs is the longest time without a probe arriving: between
	// two consecutive arrivals, or from the first send to the first arrival,
	// or from the last arrival to the last send when the flow never
	// recovered (Gap.Open). With probes every Interval, an outage of length
	// D shows as a gap between D and D + 2 intervals.
	LongestGapMs float64 `json:"longestGapMs"`
	Gap          Gap     `json:"gap"`
	// SenderLongestGapMs is the sender's own longest pause between two
	// sends: a gap this size at the receiver is the sender, not the network.
	SenderLongestGapMs float64 `json:"senderLongestGapMs"`
	// SenderPauseInGapMs is the sender's own longest pause inside the
	// longest gap (pauses over two intervals are recorded): when it is
	// close to LongestGapMs the gap was the sender stalling, not routing.
	SenderPauseInGapMs float64 `json:"senderPauseInGapMs"`

	UserSpace UserSpaceCheck `json:"userSpace"`
	Hops      []HopCount     `json:"hops,omitempty"`

	// Delivery is the flow's probes per bin of send time (holes are
	// outages), and Disruptions the runs of consecutive lost probes (the
	// first maxDisruptions; DisruptionCount counts them all). Both from
	// the receiving socket's sequence numbers (delivery.go); absent in
	// results written before they existed.
	Delivery        *Delivery    `json:"delivery,omitempty"`
	Disruptions     []Disruption `json:"disruptions,omitempty"`
	DisruptionCount int          `json:"disruptionCount"`
}

// Gap locates a flow's longest gap.
type Gap struct {
	StartNs int64  `json:"startNs"`
	EndNs   int64  `json:"endNs"`
	EndSeq  uint64 `json:"endSeq,omitempty"` // the probe that closed it
	Open    bool   `json:"open,omitempty"`   // the flow had not recovered
	// Mark is the latest mark before the gap began, and SinceMarkMs is the
	// gap's start relative to it (negative: the gap opened before the mark,
	// as it does when the last probe before an outage arrived just before
	// the event).
	Mark        string  `json:"mark,omitempty"`
	SinceMarkMs float64 `json:"sinceMarkMs,omitempty"`
}

// UserSpaceCheck is the receiving socket's own count, a cross-check of the
// BPF figures (its times include scheduling delay).
type UserSpaceCheck struct {
	Received     uint64  `json:"received"`
	LongestGapMs float64 `json:"longestGapMs"`
	MaxLatencyMs float64 `json:"maxLatencyMs"` // send to socket read, same clock
}

// HopCount is one flow's packets at one hop.
type HopCount struct {
	Hop       string  `json:"hop"`
	Packets   uint64  `json:"packets"`         // the flow's own packets (plain)
	Inner     uint64  `json:"inner,omitempty"` // the flow's packets inside IPIP
	Received  uint64  `json:"received"`        // distinct probes tracked here
	LongestMs float64 `json:"longestGapMs"`    // longest gap between probes here
}

// TunnelCount is the IPIP packets one hop counted from Src to Dst (the
// outer header's addresses).
type TunnelCount struct {
	Hop     string     `json:"hop"`
	Src     netip.Addr `json:"src"`
	Dst     netip.Addr `json:"dst"`
	Packets uint64     `json:"packets"`
}

// Mark is a named instant (monotonic ns) that gaps are reported against.
type Mark struct {
	Name string `json:"name"`
	At   int64  `json:"at"`
}

// Delivery is one flow's probes per bin of send time, from StartNs.
type Delivery struct {
	StartNs int64   `json:"startNs"`
	BinMs   float64 `json:"binMs"`
	// Sent and Received are per bin; Received[i] <= Sent[i].
	Sent     []uint32 `json:"sent"`
	Received []uint32 `json:"received"`
	// SocketReceived is how many distinct probes the socket saw in all.
	SocketReceived uint64 `json:"socketReceived"`
}

// Disruption is one run of consecutive lost probes: FirstSeq..LastSeq never
// arrived. StartNs is the send time of the first lost probe, EndNs that of
// the first probe after the run (or the last send, Open: never recovered).
type Disruption struct {
	FirstSeq uint64 `json:"firstSeq"`
	LastSeq  uint64 `json:"lastSeq"`
	Lost     uint64 `json:"lost"`
	StartNs  int64  `json:"startNs"`
	EndNs    int64  `json:"endNs"`
	Open     bool   `json:"open,omitempty"`
}

// DurationMs is how long the run of lost probes lasted by send time.
func (d Disruption) DurationMs() float64 { return float64(d.EndNs-d.StartNs) / 1e6 }

// Endpoint is one end of a probe flow: a workload.
type Endpoint struct {
	Name  string     `json:"name"`  // e.g. "node-1/wl-0"
	Netns string     `json:"netns"` // path of the workload's network namespace
	Iface string     `json:"iface"` // the workload's interface; probes arrive here
	Addr  netip.Addr `json:"addr"`  // the workload's address on Iface
}

// Flow is one direction between two workloads.
type Flow struct {
	Src Endpoint `json:"src"`
	Dst Endpoint `json:"dst"`
}

// Name is "src->dst" by endpoint names.
func (f Flow) Name() string { return f.Src.Name + "->" + f.Dst.Name }
