package probe

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/internal/monoclock"
)

// Endpoint and Flow are instrument/probe/report's (plain data a flow plan
// holds without BPF); see there. They go with the aliases in report.go
// (same reason).
type (
	Endpoint = report.Endpoint
	Flow     = report.Flow
)

// Both returns the flows a->b and b->a.
func Both(a, b Endpoint) []Flow { return []Flow{{Src: a, Dst: b}, {Src: b, Dst: a}} }

// AllPairs returns a flow for every ordered pair of distinct endpoints.
func AllPairs(eps ...Endpoint) []Flow {
	var out []Flow
	for i, a := range eps {
		for j, b := range eps {
			if i != j {
				out = append(out, Flow{Src: a, Dst: b})
			}
		}
	}
	return out
}

// Hop is an interface on the path (a node uplink, tunl0) where counters are
// attached so a report can say where probes vanished.
type Hop struct {
	Name      string        `json:"name"` // e.g. "node-1/eth0 egress"
	Netns     string        `json:"netns"`
	Iface     string        `json:"iface"`
	Direction bpf.Direction `json:"direction"`
}

// DefaultPort is the probes' UDP destination port unless Options say.
const DefaultPort = 47000

// Options configures a probe session.
type Options struct {
	// Rate is probes per second per flow; default 1000, at most 100000.
	Rate int
	// Flows to probe. Each needs a distinct (source, destination) address
	// pair: the BPF tracker tells flows apart by addresses.
	Flows []Flow
	// Hops get counters too (optional).
	Hops []Hop
	// Port is the UDP destination port; default DefaultPort.
	Port uint16
	// MinFlowing is how many probes every flow must have delivered before
	// WaitFlowing returns; default 10.
	MinFlowing uint64
	// Legacy forces clsact + cls_bpf instead of TCX for the counters.
	Legacy bool
	// MaxFlowsPerCounter sizes every counter's BPF maps
	// (bpf.AttachOptions.MaxProbeFlows). 0: twice the number of flows, at
	// least 64 — no counter can see more probe flows than the session has
	// (twice: an IPIP hop may see a flow both as outer and inner packet),
	// and the maps are preallocated, so the compiled-in 4096 would lock
	// ~2.9 MB per counter whatever the plan.
	MaxFlowsPerCounter int
	// NoRealtime keeps the send loop at normal scheduling priority instead
	// of SCHED_FIFO 1.
	NoRealtime bool
}

// Session is a running set of probe flows. Stop ends it and returns the final
// Report; Close releases everything without a report (for cleanup stacks).
type Session struct {
	opts     Options
	interval int64
	startNs  int64

	senders   []*sender
	receivers map[string]*receiver    // by dst netns + addr
	dstCtrs   map[string]*bpf.Counter // by dst netns + iface
	hopCtrs   []*bpf.Counter

	stopping atomic.Bool
	realtime atomic.Bool
	sendDone chan struct{}

	mu     sync.Mutex
	marks  []Mark
	endNs  int64
	closed bool
	final  *Report
}

func dstKey(e Endpoint) string  { return e.Netns + "|" + e.Iface }
func recvKey(e Endpoint) string { return e.Netns + "|" + e.Addr.String() }

func (o *Options) validate() error {
	if o.Rate == 0 {
		o.Rate = 1000
	}
	if o.Rate < 1 || o.Rate > 100_000 {
		return fmt.Errorf("probe options: Rate %d: want 1..100000 probes per second per flow", o.Rate)
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.MinFlowing == 0 {
		o.MinFlowing = 10
	}
	if o.MaxFlowsPerCounter == 0 {
		o.MaxFlowsPerCounter = max(64, 2*len(o.Flows))
	}
	if len(o.Flows) == 0 {
		return errors.New("probe options: Flows: need at least one flow")
	}
	seen := map[[2]netip.Addr]string{}
	for i, f := range o.Flows {
		for _, e := range []Endpoint{f.Src, f.Dst} {
			if e.Netns == "" || e.Iface == "" || !e.Addr.IsValid() {
				return fmt.Errorf("probe options: flow %d (%s): endpoint %q needs Netns, Iface and Addr", i, f.Name(), e.Name)
			}
		}
		if f.Src.Addr.Is4() != f.Dst.Addr.Is4() {
			return fmt.Errorf("probe options: flow %d (%s): %s and %s are different address families", i, f.Name(), f.Src.Addr, f.Dst.Addr)
		}
		k := [2]netip.Addr{f.Src.Addr, f.Dst.Addr}
		if other, dup := seen[k]; dup {
			return fmt.Errorf("probe options: flow %d (%s): same addresses as flow %s; the tracker could not tell them apart", i, f.Name(), other)
		}
		seen[k] = f.Name()
	}
	for i, h := range o.Hops {
		if h.Netns == "" || h.Iface == "" {
			return fmt.Errorf("probe options: hop %d (%q): needs Netns and Iface", i, h.Name)
		}
	}
	return nil
}

// Start attaches the counters (destination workload ingress, hops), opens
// the receivers and senders inside the workloads' namespaces and starts
// sending. Sending stops at Stop, Close or when ctx is done.
func Start(ctx context.Context, o Options) (s *Session, err error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	s = &Session{
		opts:      o,
		interval:  int64(time.Second) / int64(o.Rate),
		receivers: map[string]*receiver{},
		dstCtrs:   map[string]*bpf.Counter{},
		sendDone:  make(chan struct{}),
	}
	defer func() {
		if err != nil {
			close(s.sendDone) // nothing was started
			s.release()
			s = nil
		}
	}()
	// 1. Counters first, so the first probe is seen.
	for _, f := range o.Flows {
		k := dstKey(f.Dst)
		if s.dstCtrs[k] != nil {
			continue
		}
		c, err := bpf.Attach(bpf.AttachOptions{Netns: f.Dst.Netns, Iface: f.Dst.Iface, Direction: bpf.Ingress, Legacy: o.Legacy,
			MaxProbeFlows: o.MaxFlowsPerCounter})
		if err != nil {
			return nil, fmt.Errorf("start probes: destination %s: %w", f.Dst.Name, err)
		}
		s.dstCtrs[k] = c
	}
	for _, h := range o.Hops {
		c, err := bpf.Attach(bpf.AttachOptions{Netns: h.Netns, Iface: h.Iface, Direction: h.Direction, Legacy: o.Legacy,
			MaxProbeFlows: o.MaxFlowsPerCounter})
		if err != nil {
			return nil, fmt.Errorf("start probes: hop %s: %w", h.Name, err)
		}
		s.hopCtrs = append(s.hopCtrs, c)
	}
	// 2. Receivers, so probes are not answered with port unreachable.
	for _, f := range o.Flows {
		k := recvKey(f.Dst)
		if s.receivers[k] != nil {
			continue
		}
		r, err := listen(f.Dst, o.Port)
		if err != nil {
			return nil, fmt.Errorf("start probes: %w", err)
		}
		s.receivers[k] = r
	}
	// 3. Senders.
	for _, f := range o.Flows {
		sd, err := dial(f, o.Port)
		if err != nil {
			return nil, fmt.Errorf("start probes: %w", err)
		}
		sd.pauseNs = 2 * s.interval
		s.senders = append(s.senders, sd)
	}
	s.startNs = monoclock.Now()
	for _, sd := range s.senders {
		sd.bins.startNs = s.startNs
	}
	go s.sendLoop()
	go func() {
		select {
		case <-ctx.Done():
			s.stopping.Store(true)
		case <-s.sendDone:
		}
	}()
	return s, nil
}

// Mark records a named instant now and returns it.
func (s *Session) Mark(name string) int64 {
	at := monoclock.Now()
	s.MarkAt(name, at)
	return at
}

// MarkAt records a named instant taken elsewhere (monotonic ns).
func (s *Session) MarkAt(name string, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks = append(s.marks, Mark{Name: name, At: at})
}

// MapBytes is the BPF map memory of all the session's counters and how
// many counters there are.
func (s *Session) MapBytes() (bytes int64, counters int, err error) {
	all := slices.Collect(maps.Values(s.dstCtrs))
	all = append(all, s.hopCtrs...)
	for _, c := range all {
		b, err := c.MapBytes()
		if err != nil {
			return 0, 0, err
		}
		bytes += b
	}
	return bytes, len(all), nil
}

// Interval is the time between two probes of one flow, in ns.
func (s *Session) Interval() int64 { return s.interval }

// WaitFlowing returns once every flow has delivered at least
// Options.MinFlowing probes to its destination, or an error naming the flows
// that have not when ctx is done. Use it as the guard against a scenario
// passing vacuously.
func (s *Session) WaitFlowing(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var lagging []string
		for _, sd := range s.senders {
			tr, _, err := s.dstCtrs[dstKey(sd.flow.Dst)].ProbeTrack(sd.flow.Src.Addr, sd.flow.Dst.Addr, false)
			if err != nil {
				return err
			}
			if tr.Received < s.opts.MinFlowing {
				lagging = append(lagging, fmt.Sprintf("%s: sent %d, received %d, send errors %v",
					sd.flow.Name(), sd.sent.Load(), tr.Received, sd.errors()))
			}
		}
		if len(lagging) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("probes not flowing (want %d received per flow): %s: %w",
				s.opts.MinFlowing, strings.Join(lagging, "; "), ctx.Err())
		case <-tick.C:
		}
	}
}

// Report returns a report of the session so far. While probes are sending,
// Lost includes probes still in flight; only Stop's report is exact.
func (s *Session) Report() (*Report, error) {
	s.mu.Lock()
	if s.final != nil {
		defer s.mu.Unlock()
		return s.final, nil
	}
	s.mu.Unlock()
	return s.report(monoclock.Now())
}

// Stop stops sending, waits until nothing is in flight (the receive counts
// stop moving, at most 2 s), releases everything and returns the final
// report, in which Lost = Sent - Received exactly.
func (s *Session) Stop() (*Report, error) {
	s.mu.Lock()
	if s.final != nil {
		defer s.mu.Unlock()
		return s.final, nil
	}
	s.mu.Unlock()
	s.stopping.Store(true)
	<-s.sendDone
	end := monoclock.Now()
	drainErr := s.drain()
	rep, err := s.report(end)
	relErr := s.release()
	if err != nil {
		return nil, errors.Join(err, relErr)
	}
	s.mu.Lock()
	s.final = rep
	s.endNs = end
	s.mu.Unlock()
	return rep, errors.Join(drainErr, relErr)
}

// drain waits until every flow's destination count (BPF and the user-space
// receiver) equals what was sent, or has not moved for drainQuietTicks × 5 ms
// (250 ms), at most 2 s.
const drainQuietTicks = 50

func (s *Session) drain() error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := monoclock.Now() + int64(2*time.Second)
	var last uint64
	still := 0
	for {
		var total uint64
		done := true
		for _, sd := range s.senders {
			tr, _, err := s.dstCtrs[dstKey(sd.flow.Dst)].ProbeTrack(sd.flow.Src.Addr, sd.flow.Dst.Addr, false)
			if err != nil {
				return fmt.Errorf("drain probes: %w", err)
			}
			user := s.receivers[recvKey(sd.flow.Dst)].track(sd.flow.Src.Addr).received
			total += tr.Received + user
			if tr.Received < sd.sent.Load() || user < tr.Received {
				done = false
			}
		}
		if done {
			return nil
		}
		if total == last {
			still++
		} else {
			still, last = 0, total
		}
		// A flow that really lost probes never catches up, so stop once
		// nothing has arrived for a while — long enough for probes still
		// in flight on a loaded or emulated machine (gaps of 80+ ms were
		// seen under QEMU TCG), where 20 ms counted the tail as lost.
		if still >= drainQuietTicks || monoclock.Now() > deadline {
			return nil
		}
		<-tick.C
	}
}

// Close stops sending and releases sockets and counters without a report.
// Safe to call after Stop and more than once.
func (s *Session) Close() error {
	s.stopping.Store(true)
	<-s.sendDone
	return s.release()
}

func (s *Session) release() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	var errs []error
	for _, sd := range s.senders {
		errs = append(errs, sd.close())
	}
	keys := make([]string, 0, len(s.receivers))
	for k := range s.receivers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		errs = append(errs, s.receivers[k].close())
	}
	for _, c := range s.dstCtrs {
		errs = append(errs, c.Close())
	}
	for _, c := range s.hopCtrs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
