package bpf

// These tests hold the counter's contract in place: every IPv4/IPv6 packet is
// counted per flow, only well-formed probes (UDP, right magic, not a
// fragment, long enough) reach the tracker, the tracker's sequence and gap
// arithmetic is right, and the program is transparent (TC_ACT_UNSPEC).
// They run the program with BPF_PROG_TEST_RUN on crafted packets, so they need
// root but no namespaces.

import (
	"encoding/binary"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/cilium/ebpf"
)

const tcActUnspec = 0xffffffff // -1 as the kernel returns it

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loading BPF programs needs root (CAP_BPF, CAP_NET_ADMIN); run with sudo")
	}
}

var (
	v4a = netip.MustParseAddr("10.1.0.1")
	v4b = netip.MustParseAddr("10.2.0.1")
	v6a = netip.MustParseAddr("fd00:1::1")
	v6b = netip.MustParseAddr("fd00:2::1")
)

// pkt describes one crafted frame.
type pkt struct {
	src, dst  netip.Addr
	proto     uint8  // IP protocol; 0 means UDP
	fragment  bool   // IPv4: MF set; IPv6: a fragment extension header
	payload   []byte // after the UDP header (or the IP header if not UDP)
	truncTo   int    // cut the frame to this many bytes if > 0
	ipipOuter [2]netip.Addr
}

func probePayload(seq uint64) []byte {
	b := make([]byte, ProbeLen)
	PutProbe(b, seq, monoclock.Now())
	return b
}

func (p pkt) frame() []byte {
	proto := p.proto
	if proto == 0 {
		proto = 17
	}
	l4 := p.payload
	if proto == 17 {
		udp := make([]byte, 8, 8+len(p.payload))
		binary.BigEndian.PutUint16(udp[0:], 40000)
		binary.BigEndian.PutUint16(udp[2:], 47000)
		binary.BigEndian.PutUint16(udp[4:], uint16(8+len(p.payload)))
		l4 = append(udp, p.payload...)
	}
	var ip []byte
	ethType := uint16(0x0800)
	if p.src.Is4() {
		ip = ipv4(p.src, p.dst, proto, p.fragment, l4)
		if p.ipipOuter[0].IsValid() {
			ip = ipv4(p.ipipOuter[0], p.ipipOuter[1], 4, false, ip)
		}
	} else {
		ethType = 0x86dd
		next := proto
		if p.fragment {
			frag := make([]byte, 8)
			frag[0] = proto
			binary.BigEndian.PutUint16(frag[2:], 1) // offset 0, M=1
			l4 = append(frag, l4...)
			next = 44
		}
		ip = make([]byte, 40, 40+len(l4))
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
		ip[6] = next
		ip[7] = 64
		s, d := p.src.As16(), p.dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		ip = append(ip, l4...)
	}
	eth := make([]byte, 14, 14+len(ip))
	copy(eth[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(eth[6:12], []byte{2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(eth[12:], ethType)
	f := append(eth, ip...)
	if p.truncTo > 0 && p.truncTo < len(f) {
		f = f[:p.truncTo]
	}
	return f
}

func ipv4(src, dst netip.Addr, proto uint8, fragment bool, payload []byte) []byte {
	ip := make([]byte, 20, 20+len(payload))
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(payload)))
	if fragment {
		binary.BigEndian.PutUint16(ip[6:], 0x2000) // MF, offset 0
	}
	ip[8] = 64
	ip[9] = proto
	s, d := src.As4(), dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	return append(ip, payload...)
}

func loadEth(t testing.TB) *Counter {
	t.Helper()
	needRoot(t)
	c, err := load(false, AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func runFrames(t testing.TB, c *Counter, frames ...[]byte) {
	t.Helper()
	for _, f := range frames {
		ret, err := c.prog.Run(&ebpf.RunOptions{Data: f})
		if err != nil {
			t.Fatalf("run counter on %d-byte frame: %v", len(f), err)
		}
		if ret != tcActUnspec {
			t.Fatalf("counter returned %#x, want TC_ACT_UNSPEC (%#x): it must be transparent", ret, uint32(tcActUnspec))
		}
	}
}

func flowPackets(t *testing.T, c *Counter, k FlowKey) uint64 {
	t.Helper()
	fc, err := c.Flow(k)
	if err != nil {
		t.Fatal(err)
	}
	return fc.Packets
}

func track(t *testing.T, c *Counter, src, dst netip.Addr, inner bool) (ProbeTrack, bool) {
	t.Helper()
	tr, ok, err := c.ProbeTrack(src, dst, inner)
	if err != nil {
		t.Fatal(err)
	}
	return tr, ok
}

func TestProbesIPv4AndIPv6(t *testing.T) {
	c := loadEth(t)
	// 1. Three IPv4 probes and two IPv6 probes, in order.
	for seq := uint64(1); seq <= 3; seq++ {
		runFrames(t, c, pkt{src: v4a, dst: v4b, payload: probePayload(seq)}.frame())
	}
	for seq := uint64(1); seq <= 2; seq++ {
		runFrames(t, c, pkt{src: v6a, dst: v6b, payload: probePayload(seq)}.frame())
	}
	// 2. Both families are counted per flow and tracked.
	if n := flowPackets(t, c, FlowKey{Src: v4a, Dst: v4b, Proto: 17}); n != 3 {
		t.Errorf("IPv4 flow counted %d packets, want 3", n)
	}
	if n := flowPackets(t, c, FlowKey{Src: v6a, Dst: v6b, Proto: 17}); n != 2 {
		t.Errorf("IPv6 flow counted %d packets, want 2", n)
	}
	tr, ok := track(t, c, v4a, v4b, false)
	if !ok || tr.Received != 3 || tr.HighestSeq != 3 || tr.Missing != 0 || tr.Late != 0 || tr.Duplicates != 0 {
		t.Errorf("IPv4 tracker = %+v, want 3 received, highest 3, nothing missing/late/duplicate", tr)
	}
	tr6, ok := track(t, c, v6a, v6b, false)
	if !ok || tr6.Received != 2 || tr6.HighestSeq != 2 {
		t.Errorf("IPv6 tracker = %+v, want 2 received, highest 2", tr6)
	}
	if tr.FirstNs <= 0 || tr.LastNs < tr.FirstNs {
		t.Errorf("IPv4 tracker timestamps first=%d last=%d are not monotonic ns", tr.FirstNs, tr.LastNs)
	}
	// The reverse direction is a different flow.
	if _, ok := track(t, c, v4b, v4a, false); ok {
		t.Error("a tracker exists for the reverse IPv4 flow that saw no probe")
	}
}

func TestNotProbes(t *testing.T) {
	c := loadEth(t)
	// 1. Things that are counted as packets but are not probes.
	wrongMagic := probePayload(1)
	wrongMagic[0] ^= 0xff
	notProbes := []pkt{
		{src: v4a, dst: v4b, payload: wrongMagic},
		{src: v4a, dst: v4b, payload: probePayload(1), fragment: true},
		{src: v6a, dst: v6b, payload: probePayload(1), fragment: true},
		{src: v4a, dst: v4b, payload: probePayload(1)[:ProbeLen-1]}, // short payload
		{src: v4a, dst: v4b, payload: make([]byte, ProbeLen)},       // zeros: no magic
		{src: v4a, dst: v4b, proto: 6, payload: probePayload(1)},    // TCP
	}
	for _, p := range notProbes {
		runFrames(t, c, p.frame())
	}
	// 2. Frames cut short. BPF_PROG_TEST_RUN itself refuses a frame whose
	// IP header is incomplete, so the shortest are cut inside UDP.
	full := pkt{src: v4a, dst: v4b, payload: probePayload(1)}
	runFrames(t, c,
		full.withTrunc(14+20),              // IPv4 header, no UDP
		full.withTrunc(14+20+4),            // half a UDP header
		full.withTrunc(14+20+8+ProbeLen-1), // one byte short of a probe
		pkt{src: v6a, dst: v6b, payload: probePayload(1), truncTo: 14 + 40 + 8 + 3}.frame(),
	)

	tracks, err := c.ProbeTracks()
	if err != nil {
		t.Fatal(err)
	}
	if len(tracks) != 0 {
		t.Errorf("non-probes reached the tracker: %+v", tracks)
	}
	// Wrong magic, fragment, short payload, zeros and the three cut frames:
	// 7 IPv4 UDP packets, counted although none is a probe.
	if n := flowPackets(t, c, FlowKey{Src: v4a, Dst: v4b, Proto: 17}); n != 7 {
		t.Errorf("IPv4 UDP flow counted %d packets, want 7", n)
	}
	if n := flowPackets(t, c, FlowKey{Src: v6a, Dst: v6b, Proto: 17}); n != 1 {
		t.Errorf("cut IPv6 UDP frame counted %d packets, want 1", n)
	}
	if n := flowPackets(t, c, FlowKey{Src: v6a, Dst: v6b, Proto: 44}); n != 1 {
		t.Errorf("IPv6 fragment counted %d packets under next header 44, want 1", n)
	}
	if n := flowPackets(t, c, FlowKey{Src: v4a, Dst: v4b, Proto: 6}); n != 1 {
		t.Errorf("TCP flow counted %d packets, want 1", n)
	}
	flows, err := c.Flows()
	if err != nil {
		t.Fatal(err)
	}
	if len(flows) != 4 {
		t.Errorf("got %d flows, want 4 (udp v4, udp v6, frag v6, tcp v4): %+v", len(flows), flows)
	}
}

func (p pkt) withTrunc(n int) []byte { p.truncTo = n; return p.frame() }

func TestGapMissingLateDuplicate(t *testing.T) {
	c := loadEth(t)
	probe := func(seq uint64) []byte { return pkt{src: v4a, dst: v4b, payload: probePayload(seq)}.frame() }

	// 1. 1, 2, then a pause, then 5 (3 and 4 missing), 3 late, 3 again
	// (duplicate), 6.
	start := monoclock.Now()
	runFrames(t, c, probe(1), probe(2))
	before := monoclock.Now()
	// The pause is the gap under test, not synchronisation.
	time.Sleep(30 * time.Millisecond)
	after := monoclock.Now()
	runFrames(t, c, probe(5))
	end := monoclock.Now()
	runFrames(t, c, probe(3), probe(3), probe(6))

	tr, ok := track(t, c, v4a, v4b, false)
	if !ok {
		t.Fatal("no tracker for the probe flow")
	}
	// 3 arrived 2 behind the highest (5): a reordering of depth 2.
	want := ProbeTrack{Received: 5, HighestSeq: 6, Missing: 1, Late: 1, Duplicates: 1, LastSeq: 6, MaxGapEndSeq: 5, MaxLateDepth: 2}
	got := tr
	got.FlowKey, got.FirstNs, got.LastNs, got.MaxGapNs, got.MaxGapStartNs = FlowKey{}, 0, 0, 0, 0
	want.FirstSeq = 1
	if got != want {
		t.Errorf("tracker counts = %+v, want %+v", got, want)
	}
	// 2. The gap is bounded by what the test clock saw around the pause.
	if lo, hi := after-before, end-start; tr.MaxGapNs < lo || tr.MaxGapNs > hi {
		t.Errorf("largest gap %d ns, want within [%d, %d] (the pause as seen by the test)", tr.MaxGapNs, lo, hi)
	}
	if tr.MaxGapStartNs > before || tr.MaxGapStartNs+tr.MaxGapNs < after {
		t.Errorf("gap [%d, +%d] does not cover the pause [%d, %d]", tr.MaxGapStartNs, tr.MaxGapNs, before, after)
	}
	// 3. A sequence jump beyond the duplicate window resets it cleanly.
	runFrames(t, c, probe(200), probe(6))
	tr, _ = track(t, c, v4a, v4b, false)
	if tr.HighestSeq != 200 || tr.Missing != 1+193-1 || tr.Late != 2 || tr.MaxLateDepth != 194 {
		t.Errorf("after a jump to 200 and a late 6: %+v, want highest 200, missing 193, late 2, late depth 194", tr)
	}
}

func TestIPIPInnerFlow(t *testing.T) {
	c := loadEth(t)
	node1, node2 := netip.MustParseAddr("172.16.0.1"), netip.MustParseAddr("172.16.0.2")
	for seq := uint64(1); seq <= 4; seq++ {
		runFrames(t, c, pkt{src: v4a, dst: v4b, payload: probePayload(seq), ipipOuter: [2]netip.Addr{node1, node2}}.frame())
	}
	if n := flowPackets(t, c, FlowKey{Src: node1, Dst: node2, Proto: 4}); n != 4 {
		t.Errorf("outer IPIP flow counted %d packets, want 4", n)
	}
	if n := flowPackets(t, c, FlowKey{Src: v4a, Dst: v4b, Proto: 17, Inner: true}); n != 4 {
		t.Errorf("inner flow counted %d packets, want 4", n)
	}
	if tr, ok := track(t, c, v4a, v4b, true); !ok || tr.Received != 4 {
		t.Errorf("inner probe tracker = %+v, want 4 received", tr)
	}
}

// The L3 variant (tunl0) cannot be fed through BPF_PROG_TEST_RUN, which
// always presents an Ethernet frame; at least it must pass the verifier.
func TestL3VariantLoads(t *testing.T) {
	needRoot(t)
	c, err := load(true, AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// BenchmarkProbeTracker reports the program's cost per packet as measured
// by the kernel over many repetitions of one frame.
func BenchmarkProbeTracker(b *testing.B) {
	c := loadEth(b)
	frames := map[string][]byte{
		// Every repetition after the first is a duplicate: lock, compare.
		"probe": pkt{src: v4a, dst: v4b, payload: probePayload(1)}.frame(),
		// Counted, parsed up to the magic, not tracked.
		"udp-not-probe": pkt{src: v4a, dst: v4b, payload: make([]byte, ProbeLen)}.frame(),
		"tcp":           pkt{src: v4a, dst: v4b, proto: 6, payload: make([]byte, 32)}.frame(),
		"probe-ipv6":    pkt{src: v6a, dst: v6b, payload: probePayload(1)}.frame(),
	}
	for _, name := range []string{"probe", "probe-ipv6", "udp-not-probe", "tcp"} {
		b.Run(name, func(b *testing.B) {
			const repeat = 1_000_000
			var total time.Duration
			for b.Loop() {
				_, per, err := c.prog.Benchmark(frames[name], repeat, nil)
				if err != nil {
					b.Fatal(err)
				}
				total += per
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/pkt")
		})
	}
}

// The maps are sized from AttachOptions (a flow plan's size), and the
// memory the kernel charges follows; the default keeps counter.c's size.
func TestMapSizesFromOptions(t *testing.T) {
	needRoot(t)
	sizes := map[int]int64{}
	for _, n := range []int{0, 64, 1024} {
		c, err := load(false, AttachOptions{MaxProbeFlows: n})
		if err != nil {
			t.Fatal(err)
		}
		want := uint32(n)
		if n == 0 {
			want = DefaultMaxProbeFlows
		}
		if got := c.tracks.MaxEntries(); got != want {
			t.Errorf("MaxProbeFlows %d: tracker map has %d entries, want %d", n, got, want)
		}
		if got, wantF := c.flows.MaxEntries(), max(1024, 4*want); got != wantF {
			t.Errorf("MaxProbeFlows %d: flow map has %d entries, want %d", n, got, wantF)
		}
		b, err := c.MapBytes()
		if err != nil {
			t.Fatal(err)
		}
		sizes[n] = b
		t.Logf("MaxProbeFlows %d: %d bytes of map memory", n, b)
		c.Close()
	}
	if !(sizes[64] < sizes[1024] && sizes[1024] < sizes[0]) {
		t.Errorf("map memory does not follow the sizes: %v", sizes)
	}
}
