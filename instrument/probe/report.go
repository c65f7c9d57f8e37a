package probe

import (
	"fmt"
	"sort"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/internal/monoclock"
	"golang.org/x/sys/unix"
)

// The report's data types are instrument/probe/report's, where the results
// model reads them; these aliases keep probe.Report and the rest. They go
// when the scenario suite's machinery leaves package scenarios (issue 42,
// part 2): its package-level func report takes the name the package
// instrument/probe/report would need there.
type (
	Report         = report.Report
	Total          = report.Total
	GapReport      = report.GapReport
	Gap            = report.Gap
	UserSpaceCheck = report.UserSpaceCheck
	HopCount       = report.HopCount
	TunnelCount    = report.TunnelCount
	Mark           = report.Mark
	Delivery       = report.Delivery
	Disruption     = report.Disruption
)

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
	// After the flows: outer counts only grow, so they cover the inner
	// ones read above.
	tunnels, err := s.tunnelCounts()
	if err != nil {
		return nil, err
	}
	rep.Tunnels = tunnels
	return rep, nil
}

// tunnelCounts lists the IPIP outer flows (protocol 4) every hop counted,
// by hop, then source and destination.
func (s *Session) tunnelCounts() ([]TunnelCount, error) {
	var out []TunnelCount
	for i, h := range s.opts.Hops {
		fs, err := s.hopCtrs[i].Flows()
		if err != nil {
			return nil, fmt.Errorf("report hop %s: %w", h.Name, err)
		}
		var at []TunnelCount
		for _, f := range fs {
			if f.Proto == unix.IPPROTO_IPIP && !f.Inner {
				at = append(at, TunnelCount{Hop: h.Name, Src: f.Src, Dst: f.Dst, Packets: f.Packets})
			}
		}
		sort.Slice(at, func(a, b int) bool {
			if at[a].Src != at[b].Src {
				return at[a].Src.Less(at[b].Src)
			}
			return at[a].Dst.Less(at[b].Dst)
		})
		out = append(out, at...)
	}
	return out, nil
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
