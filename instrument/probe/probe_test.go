package probe

// The probes are the instrument every handover verdict rests on, so these
// tests hold their accuracy in place: an outage made with a blackhole route on
// the path, its start and end each bracketed by monotonic marks taken before
// and after the syscall, must come back as a gap that starts and ends inside
// those brackets widened by nothing but the run's own resolution (the
// sender's probe spacing and the probes' send-to-receive latency), with
// Lost = Sent - Received exactly, agreeing with the sequence numbers the
// tracker saw missing, and within what the brackets allow at the probe rate.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// star is a router namespace with n workload namespaces hanging off it:
// wl-i has eth0 = 10.88.i.2/24 (default via 10.88.i.1), the router has
// r-i = 10.88.i.1/24 and forwards. Everything is created inside the
// namespaces; the root namespace is never touched.
type star struct {
	router ns.NetNS
	rh     *netlink.Handle
	wls    []Endpoint
}

func newStar(tb testing.TB, n int) *star {
	tb.Helper()
	r := testenv.NewRun(tb)
	mkns := func(name string) ns.NetNS { return testenv.NetNSIn(tb, r, name).NS }
	rt := testenv.NetNSIn(tb, r, "rt")
	st := &star{router: rt.NS, rh: rt.Handle}
	if err := nsutil.SetSysctls(st.router, map[string]string{"net/ipv4/ip_forward": "1"}); err != nil {
		tb.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		wl := mkns(fmt.Sprintf("wl%d", i))
		wh, err := nsutil.Handle(wl)
		if err != nil {
			tb.Fatal(err)
		}
		rname := fmt.Sprintf("r-%d", i)
		if err := wh.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: rname, PeerNamespace: netlink.NsFd(st.router.Fd())}); err != nil {
			tb.Fatalf("veth eth0/%s: %v", rname, err)
		}
		up := func(h *netlink.Handle, dev, cidr string) netlink.Link {
			l, err := h.LinkByName(dev)
			if err != nil {
				tb.Fatal(err)
			}
			a, _ := netlink.ParseAddr(cidr)
			if err := h.AddrAdd(l, a); err != nil {
				tb.Fatalf("address %s on %s: %v", cidr, dev, err)
			}
			if err := h.LinkSetUp(l); err != nil {
				tb.Fatal(err)
			}
			return l
		}
		eth0 := up(wh, "eth0", fmt.Sprintf("10.88.%d.2/24", i))
		up(st.rh, rname, fmt.Sprintf("10.88.%d.1/24", i))
		if err := wh.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: net.ParseIP(fmt.Sprintf("10.88.%d.1", i))}); err != nil {
			tb.Fatalf("default route in wl%d: %v", i, err)
		}
		wh.Close()
		st.wls = append(st.wls, Endpoint{
			Name:  fmt.Sprintf("wl%d", i),
			Netns: wl.Path(),
			Iface: "eth0",
			Addr:  netip.MustParseAddr(fmt.Sprintf("10.88.%d.2", i)),
		})
	}
	return st
}

func blackhole(a netip.Addr) *netlink.Route {
	return &netlink.Route{
		Dst:      &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)},
		Type:     unix.RTN_BLACKHOLE,
		Protocol: unix.RTPROT_STATIC,
	}
}

func flowByName(t *testing.T, rep *Report, name string) GapReport {
	t.Helper()
	for _, f := range rep.Flows {
		if f.Flow == name {
			return f
		}
	}
	t.Fatalf("no flow %q in report", name)
	return GapReport{}
}

// waitArrivals polls until flow has received n more probes than it had.
func waitArrivals(t *testing.T, s *Session, flow string, n uint64) {
	t.Helper()
	rep, err := s.Report()
	if err != nil {
		t.Fatal(err)
	}
	want := flowByName(t, rep, flow).Received + n
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		rep, err := s.Report()
		if err != nil {
			t.Fatal(err)
		}
		if got := flowByName(t, rep, flow).Received; got >= want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("flow %s: fewer than %d probes arrived in 5 s", flow, n)
		case <-tick.C:
		}
	}
}

// bounds is what a blackhole outage bracketed by [addBefore, addAfter] and
// [delBefore, delAfter] may look like to one flow, derived from that flow's
// resolution in this run:
//   - spacing: the longest time between two sends (the sender's longest pause,
//     at least one interval): some probe is sent in every window this long;
//   - latency: the longest send-to-socket-read time of any probe that
//     arrived, an upper bound on send-to-BPF-ingress, so a probe crosses the
//     router within latency of its send.
//
// The route is in place from some A in the add bracket to some D in the
// delete bracket. The gap opens at the last arrival before the outage: that
// probe crossed the router before A <= addAfter, so it arrived by
// addAfter+latency; a probe sent in [addBefore-latency-spacing,
// addBefore-latency] crossed before addBefore <= A, so the gap opens no
// earlier than that. It closes at the first arrival after: that probe crossed
// the router after D >= delBefore; and one sent in [delAfter,
// delAfter+spacing] crosses after D, arriving by delAfter+spacing+latency.
// Probes sent in [addAfter, delBefore-latency] are certainly lost; only those
// sent in [addBefore-latency, delAfter] can be. The sender keeps its cadence
// (catching up after a stall), so a window W holds between
// floor((W-spacing)/interval) and floor((W+spacing)/interval)+1 sends.
type bounds struct {
	spacing, latency   int64
	startMin, startMax int64
	endMin, endMax     int64
	lostMin, lostMax   int64
}

func outageBounds(interval int64, f GapReport, addBefore, addAfter, delBefore, delAfter int64) bounds {
	b := bounds{
		spacing: max(interval, int64(f.SenderLongestGapMs*1e6)),
		latency: int64(f.UserSpace.MaxLatencyMs * 1e6),
	}
	// The report carries ms as float64; round both up by a ns so the
	// conversion never narrows a bound.
	b.spacing++
	b.latency++
	b.startMin, b.startMax = addBefore-b.latency-b.spacing, addAfter+b.latency
	b.endMin, b.endMax = delBefore, delAfter+b.spacing+b.latency
	sends := func(w int64, lo bool) int64 {
		if lo {
			return max(0, (w-b.spacing)/interval)
		}
		return (w+b.spacing)/interval + 1
	}
	b.lostMin = sends(delBefore-b.latency-addAfter, true)
	b.lostMax = sends(delAfter-(addBefore-b.latency), false)
	return b
}

func TestGapAccuracyBlackhole(t *testing.T) {
	st := newStar(t, 2)
	a, b := st.wls[0], st.wls[1]
	for _, outage := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second} {
		t.Run(outage.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// 1. Probes at 1 kHz both ways, and flowing.
			s, err := Start(ctx, Options{Rate: 1000, Flows: Both(a, b)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.WaitFlowing(ctx); err != nil {
				t.Fatal(err)
			}

			// 2. Outage: blackhole b's address in the router, for `outage`.
			// Each syscall is bracketed by a mark before and after: the
			// route appears somewhere in [addBefore, addAfter] and goes
			// somewhere in [delBefore, delAfter], and that is all the test
			// knows about when the kernel acted.
			mark := s.Mark("blackhole " + b.Addr.String())
			addBefore := monoclock.Now()
			if err := st.rh.RouteAdd(blackhole(b.Addr)); err != nil {
				t.Fatal(err)
			}
			addAfter := monoclock.Now()
			// Holding the outage for its length is the injected event,
			// not a wait for a condition.
			<-time.After(outage)
			delBefore := monoclock.Now()
			if err := st.rh.RouteDel(blackhole(b.Addr)); err != nil {
				t.Fatal(err)
			}
			delAfter := monoclock.Now()

			// 3. Recovery observed, then stop.
			waitArrivals(t, s, a.Name+"->"+b.Name, 50)
			rep, err := s.Stop()
			if err != nil {
				t.Fatal(err)
			}
			ab := flowByName(t, rep, a.Name+"->"+b.Name)
			ba := flowByName(t, rep, b.Name+"->"+a.Name)

			// 4. Verdict, with every tolerance taken from this run's own
			// resolution (see outageBounds).
			bd := outageBounds(s.Interval(), ab, addBefore, addAfter, delBefore, delAfter)
			gapNs := ab.Gap.EndNs - ab.Gap.StartNs
			t.Logf("outage %v: route add took %.3f ms, del %.3f ms; measured gap %.3f ms, error %+.3f ms against the certain outage [add after, del before] of %.3f ms; "+
				"resolution: interval %.3f ms, sender longest pause %.3f ms, max send-to-receive latency %.3f ms; "+
				"sent %d received %d lost %d (allowed %d..%d) missing %d, user-space gap %.3f ms, gap start %+.3f ms from mark",
				outage, monoclock.Ms(addAfter-addBefore), monoclock.Ms(delAfter-delBefore), ab.LongestGapMs,
				monoclock.Ms(gapNs-(delBefore-addAfter)), monoclock.Ms(delBefore-addAfter),
				monoclock.Ms(s.Interval()), ab.SenderLongestGapMs, ab.UserSpace.MaxLatencyMs,
				ab.Sent, ab.Received, ab.Lost, bd.lostMin, bd.lostMax, ab.Missing, ab.UserSpace.LongestGapMs, ab.Gap.SinceMarkMs)
			if bd.endMin <= bd.startMax {
				t.Fatalf("%s: this run's resolution (spacing %d ns, latency %d ns) is coarser than the %v outage: nothing to judge", ab.Flow, bd.spacing, bd.latency, outage)
			}
			if ab.Gap.Open {
				t.Fatalf("%s: gap %+v still open: the flow never recovered", ab.Flow, ab.Gap)
			}
			if ab.Gap.StartNs < bd.startMin || ab.Gap.StartNs > bd.startMax {
				t.Errorf("%s: gap began at %d, want within [%d, %d] (the route add bracket [%d, %d] widened by one send spacing %d ns and the latency %d ns)",
					ab.Flow, ab.Gap.StartNs, bd.startMin, bd.startMax, addBefore, addAfter, bd.spacing, bd.latency)
			}
			if ab.Gap.EndNs < bd.endMin || ab.Gap.EndNs > bd.endMax {
				t.Errorf("%s: gap ended at %d, want within [%d, %d] (the route delete bracket [%d, %d] widened by one send spacing %d ns and the latency %d ns)",
					ab.Flow, ab.Gap.EndNs, bd.endMin, bd.endMax, delBefore, delAfter, bd.spacing, bd.latency)
			}
			if ab.Lost != int64(ab.Sent)-int64(ab.Received) || ab.Lost != int64(ab.Missing) {
				t.Errorf("%s: lost %d, sent-received %d, missing sequence numbers %d: want all equal",
					ab.Flow, ab.Lost, int64(ab.Sent)-int64(ab.Received), ab.Missing)
			}
			if ab.UserSpace.Received != ab.Received {
				t.Errorf("%s: user-space receiver counted %d, BPF %d", ab.Flow, ab.UserSpace.Received, ab.Received)
			}
			if ab.Lost < bd.lostMin || ab.Lost > bd.lostMax {
				t.Errorf("%s: lost %d probes; the brackets at %.0f probes/s allow %d..%d", ab.Flow, ab.Lost, 1e9/float64(s.Interval()), bd.lostMin, bd.lostMax)
			}
			if since := ab.Gap.StartNs - mark; ab.Gap.Mark != "blackhole "+b.Addr.String() || since < bd.startMin-mark || since > bd.startMax-mark {
				t.Errorf("%s: gap blamed on mark %q, %+.3f ms after it; want the blackhole mark, %+.3f..%+.3f ms",
					ab.Flow, ab.Gap.Mark, ab.Gap.SinceMarkMs, monoclock.Ms(bd.startMin-mark), monoclock.Ms(bd.startMax-mark))
			}
			// Positive control: the other direction never crossed the blackhole.
			if ba.Lost != 0 || ba.Received == 0 {
				t.Errorf("%s (not blackholed): sent %d received %d lost %d, want no loss", ba.Flow, ba.Sent, ba.Received, ba.Lost)
			}
			if rep.Total.Lost != ab.Lost+ba.Lost || rep.Total.LongestGapFlow != ab.Flow {
				t.Errorf("total %+v does not add up", rep.Total)
			}
			if _, err := json.Marshal(rep); err != nil {
				t.Errorf("report is not JSON-serialisable: %v", err)
			}
		})
	}
}

// Per-hop counters say where probes vanished: the router's egress toward b
// sees none of them during the outage, its ingress from a sees them all.
func TestHopsAndNotFlowing(t *testing.T) {
	st := newStar(t, 2)
	a, b := st.wls[0], st.wls[1]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hops := []Hop{
		{Name: "rt/r-1 ingress", Netns: st.router.Path(), Iface: "r-1", Direction: bpf.Ingress},
		{Name: "rt/r-2 egress", Netns: st.router.Path(), Iface: "r-2", Direction: bpf.Egress},
	}
	// 1. b blackholed from the start: WaitFlowing must say so.
	if err := st.rh.RouteAdd(blackhole(b.Addr)); err != nil {
		t.Fatal(err)
	}
	s, err := Start(ctx, Options{Rate: 2000, Flows: []Flow{{Src: a, Dst: b}}, Hops: hops, Legacy: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = s.WaitFlowing(wctx)
	wcancel()
	if err == nil {
		t.Fatal("WaitFlowing returned nil with every probe blackholed")
	}
	t.Logf("WaitFlowing: %v", err)
	// 2. Lift it; probes flow.
	if err := st.rh.RouteDel(blackhole(b.Addr)); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	ab := rep.Flows[0]
	in, out := ab.Hops[0], ab.Hops[1]
	if in.Packets != ab.Sent || out.Packets != ab.Received || in.Packets-out.Packets != uint64(ab.Lost) {
		t.Errorf("hops: ingress r-1 %d, egress r-2 %d; sent %d received %d lost %d: want the loss between the two hops",
			in.Packets, out.Packets, ab.Sent, ab.Received, ab.Lost)
	}
	if ab.Gap.Open || ab.Gap.EndSeq != uint64(ab.Lost)+1 {
		t.Errorf("gap %+v: want the head gap closed by the first probe after the blackhole", ab.Gap)
	}
	js, _ := json.MarshalIndent(ab, "", "  ")
	t.Logf("flow report: %s", js)
}

// BenchmarkSendCPU reports the harness's CPU (user+sys, whole process, via
// getrusage) per wall second while probing 6 flows (all pairs of 3
// workloads). Run with -benchtime=1x; each iteration probes for 2 s.
func BenchmarkSendCPU(b *testing.B) {
	st := newStar(b, 3)
	for _, rate := range []int{10000, 1667} {
		b.Run(fmt.Sprintf("rate=%d/flow", rate), func(b *testing.B) {
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				s, err := Start(ctx, Options{Rate: rate, Flows: AllPairs(st.wls...)})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.WaitFlowing(ctx); err != nil {
					b.Fatal(err)
				}
				var r0, r1 unix.Rusage
				_ = unix.Getrusage(unix.RUSAGE_SELF, &r0)
				w0 := monoclock.Now()
				<-time.After(2 * time.Second) // the measurement window
				_ = unix.Getrusage(unix.RUSAGE_SELF, &r1)
				wall := float64(monoclock.Now()-w0) / 1e9
				rep, err := s.Stop()
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				cpu := func(r unix.Rusage) float64 {
					return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e9
				}
				user := float64(r1.Utime.Nano()-r0.Utime.Nano()) / 1e9 / wall
				sys := float64(r1.Stime.Nano()-r0.Stime.Nano()) / 1e9 / wall
				b.ReportMetric((cpu(r1)-cpu(r0))/wall, "cpu-s/wall-s")
				b.ReportMetric(user, "user-s/wall-s")
				b.ReportMetric(sys, "sys-s/wall-s")
				b.ReportMetric(float64(rep.Total.Sent)/(monoclock.Ms(rep.EndNs-rep.StartNs)/1000), "probes/s")
				b.ReportMetric(float64(rep.Total.Lost), "lost")
				var worstSender float64
				for _, f := range rep.Flows {
					worstSender = max(worstSender, f.SenderLongestGapMs)
				}
				b.ReportMetric(worstSender, "sender-max-pause-ms")
			}
		})
	}
}
