package probe

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/internal/monoclock"
	"golang.org/x/sys/unix"
)

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

func (s *Session) report(end int64) (*Report, error) {
	s.mu.Lock()
	marks := append([]Mark(nil), s.marks...)
	s.mu.Unlock()
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].At < marks[j].At })
	rep := &Report{StartNs: s.startNs, EndNs: end, Rate: s.opts.Rate, SenderRealtime: s.realtime.Load(), Marks: marks}
	for _, sd := range s.senders {
		g, err := s.flowReport(sd, marks)
		if err != nil {
			return nil, err
		}
		rep.Flows = append(rep.Flows, g)
		t := &rep.Total
		t.Flows++
		t.Sent += g.Sent
		t.Received += g.Received
		t.Lost += g.Lost
		if g.Lost != 0 {
			t.FlowsWithLoss++
		}
		t.Late += g.Late
		t.Duplicates += g.Duplicates
		t.MaxReorderDepth = max(t.MaxReorderDepth, g.ReorderDepth)
		if g.LongestGapMs > t.LongestGapMs {
			t.LongestGapMs, t.LongestGapFlow, t.SenderPauseInGapMs = g.LongestGapMs, g.Flow, g.SenderPauseInGapMs
		}
	}
	return rep, nil
}

func (s *Session) flowReport(sd *sender, marks []Mark) (GapReport, error) {
	f := sd.flow
	tr, _, err := s.dstCtrs[dstKey(f.Dst)].ProbeTrack(f.Src.Addr, f.Dst.Addr, false)
	if err != nil {
		return GapReport{}, fmt.Errorf("report %s: %w", f.Name(), err)
	}
	sent := sd.sent.Load()
	g := GapReport{
		Flow:               f.Name(),
		SrcAddr:            f.Src.Addr,
		DstAddr:            f.Dst.Addr,
		Sent:               sent,
		SendErrors:         sd.errors(),
		Received:           tr.Received,
		Lost:               int64(sent) - int64(tr.Received),
		Missing:            tr.Missing,
		FirstSeq:           tr.FirstSeq,
		HighestSeq:         tr.HighestSeq,
		Late:               tr.Late,
		Duplicates:         tr.Duplicates,
		ReorderDepth:       tr.MaxLateDepth,
		SenderLongestGapMs: monoclock.Ms(sd.maxGapNs.Load()),
	}
	// The longest gap: between arrivals (BPF), before the first arrival, or
	// after the last one if later probes never came.
	firstSent, lastSent := sd.firstNs.Load(), sd.lastNs.Load()
	gap := Gap{StartNs: tr.MaxGapStartNs, EndNs: tr.MaxGapStartNs + tr.MaxGapNs, EndSeq: tr.MaxGapEndSeq}
	switch {
	case sent > 0 && tr.Received == 0:
		gap = Gap{StartNs: firstSent, EndNs: lastSent, Open: true}
	case tr.Received > 0:
		if tr.HighestSeq < sent && lastSent-tr.LastNs > gap.EndNs-gap.StartNs {
			gap = Gap{StartNs: tr.LastNs, EndNs: lastSent, Open: true}
		}
		if tr.FirstSeq > 1 && tr.FirstNs-firstSent > gap.EndNs-gap.StartNs {
			gap = Gap{StartNs: firstSent, EndNs: tr.FirstNs, EndSeq: tr.FirstSeq}
		}
	}
	g.Gap = gap
	g.LongestGapMs = monoclock.Ms(gap.EndNs - gap.StartNs)
	if gap.EndNs > gap.StartNs {
		g.SenderPauseInGapMs = monoclock.Ms(sd.pauseWithin(gap.StartNs, gap.EndNs))
	}
	if len(marks) > 0 && gap.EndNs > gap.StartNs {
		// The gap is blamed on the latest mark before it began. Its start
		// is the last probe that arrived, so the outage itself began up to
		// one interval later: a mark within that interval counts as before.
		m := marks[0]
		for _, x := range marks {
			if x.At <= gap.StartNs+s.interval {
				m = x
			}
		}
		g.Gap.Mark, g.Gap.SinceMarkMs = m.Name, monoclock.Ms(gap.StartNs-m.At)
	}

	ut := s.receivers[recvKey(f.Dst)].track(f.Src.Addr)
	g.UserSpace = UserSpaceCheck{
		Received:     ut.received,
		LongestGapMs: monoclock.Ms(ut.maxGapNs),
		MaxLatencyMs: monoclock.Ms(ut.maxLatencyNs),
	}

	seen, distinct := s.receivers[recvKey(f.Dst)].seen(f.Src.Addr)
	sd.errMu.Lock()
	bins := sd.bins
	bins.first = append([]uint64(nil), sd.bins.first...)
	sd.errMu.Unlock()
	g.Delivery = delivery(&bins, seen, distinct)
	g.Disruptions, g.DisruptionCount = disruptions(&bins, seen)

	for i, h := range s.opts.Hops {
		c := s.hopCtrs[i]
		hc := HopCount{Hop: h.Name}
		plain, err := c.Flow(bpf.FlowKey{Src: f.Src.Addr, Dst: f.Dst.Addr, Proto: unix.IPPROTO_UDP})
		if err != nil {
			return GapReport{}, err
		}
		inner, err := c.Flow(bpf.FlowKey{Src: f.Src.Addr, Dst: f.Dst.Addr, Proto: unix.IPPROTO_UDP, Inner: true})
		if err != nil {
			return GapReport{}, err
		}
		hc.Packets, hc.Inner = plain.Packets, inner.Packets
		for _, innerFlow := range []bool{false, true} {
			ht, ok, err := c.ProbeTrack(f.Src.Addr, f.Dst.Addr, innerFlow)
			if err != nil {
				return GapReport{}, err
			}
			if ok {
				hc.Received += ht.Received
				hc.LongestMs = max(hc.LongestMs, monoclock.Ms(ht.MaxGapNs))
			}
		}
		g.Hops = append(g.Hops, hc)
	}
	return g, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
