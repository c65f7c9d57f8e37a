package scenarios_test

// IPIP on the wire: what a node sends for a workload's flow via tunl0 is
// what the kernel's fallback tunnel (ipip, all parameters zero, as Calico
// uses it) sends, whether tunl0 is the kernel's or birdcage's eBPF
// emulation (topo.TunnelEBPF). Run natively on the emulation and in the VM
// on the real module, these checks hold the emulation against the kernel.
//
// The kernel's rules (net/ipv4/ip_tunnel.c, ip_tunnel_xmit; the fallback
// device's parameters are zero): protocol 4; outer destination the next hop
// of the route via tunl0 (the node the block lives on), outer source the
// address the kernel picks for the route to it (the underlay's); TTL 0 =
// inherit, so the outer TTL is the inner one after forwarding; TOS 0 = DSCP
// 0 and the inner ECN, CE going out as ECT(0); DF copied from the inner
// packet (pmtudisc is off on the fallback device). A DF packet larger than
// tunl0's MTU (1480: the underlay's 1500 less 20) is answered with ICMP
// frag-needed at that MTU. A packet sent on tunl0 with no route via it
// never leaves the underlay un-encapsulated.
//
// The second spec is the negative control: the emulation with its
// encapsulation disabled (topo.TunnelEBPFNoEncap) must fail these checks.

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/encap"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/pcap"
	"github.com/birdcage/birdcage/topo"
)

// wireCase is one crafted flow: the workload's socket sets TOS, TTL and DF.
type wireCase struct {
	name     string
	srcPort  int
	tos, ttl int
	df       bool
	// want on the wire, outer header
	wantTOS uint8
}

var wireCases = []wireCase{
	{name: "DSCP EF with ECT(0), DF", srcPort: 41001, tos: 0xba, ttl: 64, df: true, wantTOS: 0x02},
	{name: "no DF, ECT(1), low TTL", srcPort: 41002, tos: 0x01, ttl: 9, df: false, wantTOS: 0x01},
	{name: "CE, DF", srcPort: 41003, tos: 0x2b, ttl: 64, df: true, wantTOS: 0x02},
}

const (
	wirePort     = 47123 // the crafted flows' destination port
	noRoutePort  = 47124 // the packet sent on tunl0 with no route via it
	ipipMTU      = 1480
	oversizedUDP = 1472 // a 1500-byte IP packet: fits the workload's link, not tunl0
)

// wireReport is what checkIPIPWire saw, for the report, and what is wrong.
type wireReport struct {
	seen       []string
	violations []string
}

// checkIPIPWire sends the crafted flows from node-1's workload to node-3's
// (another subnet: only the tunnel carries it), captures node-1's uplink,
// and checks every captured packet of them against the kernel's rules.
func checkIPIPWire(ctx context.Context, c *harness.Cluster) wireReport {
	GinkgoHelper()
	var rep wireReport
	bad := func(format string, args ...any) {
		if v := fmt.Sprintf(format, args...); !slices.Contains(rep.violations, v) { // retries repeat themselves
			rep.violations = append(rep.violations, v)
		}
	}
	from, to := c.Node("node-1"), c.Node("node-3")
	dstBlock := blockOf(to.NS, "ipip-pool")
	Eventually(from).WithContext(ctx).WithTimeout(machine.Wait(30*time.Second)).WithPolling(50*time.Millisecond).
		Should(judge.HaveClusterRoute(dstBlock).Via(topo.TunnelDevice), "guard: node-1 routes node-3's block via tunl0")
	src, dst := from.NS.Workloads[0], to.NS.Workloads[0]
	uplink := from.NS.Spec.Interfaces[0]
	outerSrc := netip.MustParsePrefix(uplink.Address).Addr()
	outerDst := to.NS.Address.Addr()

	dir := GinkgoT().TempDir()
	path := filepath.Join(dir, "node-1-uplink.pcap")
	keep := func(link layers.LinkType, b []byte) bool {
		return pcap.UDPPort(wirePort)(link, b) || pcap.UDPPort(noRoutePort)(link, b)
	}
	capt, err := pcap.Start(pcap.Options{Netns: from.NS.Path, Iface: uplink.Name, Path: path, Keep: keep})
	Expect(err).NotTo(HaveOccurred())

	// The receiver, so the flow is delivered end to end too.
	var rx *net.UDPConn
	Expect(dst.NS.Do(func(ns.NetNS) error {
		var err error
		rx, err = net.ListenUDP("udp4", &net.UDPAddr{IP: dst.IPv4.AsSlice(), Port: wirePort})
		return err
	})).To(Succeed())
	defer rx.Close()

	for _, wc := range wireCases {
		conn := dialFrom(src, src.IPv4, wc.srcPort, dst.IPv4, wirePort)
		setSockopts(conn, wc.tos, wc.ttl, wc.df)
		// Until one arrives (the first may wait for neighbours).
		delivered := false
		for i := 0; i < 50 && !delivered; i++ {
			_, err := conn.Write([]byte("birdcage wire check " + wc.name))
			Expect(err).NotTo(HaveOccurred())
			_ = rx.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			buf := make([]byte, 2048)
			if n, from, err := rx.ReadFromUDP(buf); err == nil && from.Port == wc.srcPort && n > 0 {
				delivered = true
			}
		}
		conn.Close()
		if !delivered {
			bad("%s: %s -> %s not delivered through the tunnel", wc.name, src.IPv4, dst.IPv4)
		}
	}

	// An oversized DF packet: frag-needed at the IPIP MTU comes back, and
	// the workload's path MTU to dst drops to it.
	big := dialFrom(src, src.IPv4, 41010, dst.IPv4, wirePort)
	setSockopts(big, 0, 64, true)
	pmtu := 0
	for deadline := time.Now().Add(machine.Wait(5 * time.Second)); time.Now().Before(deadline); {
		_, _ = big.Write(make([]byte, oversizedUDP)) // EMSGSIZE once the PMTU is known
		pmtu = getsockoptInt(big, unix.IPPROTO_IP, unix.IP_MTU)
		if pmtu == ipipMTU {
			break
		}
		<-time.After(20 * time.Millisecond) // rate of the oversized sends
	}
	big.Close()
	rep.seen = append(rep.seen, fmt.Sprintf("path MTU %s -> %s after an oversized DF packet: %d", src.IPv4, dst.IPv4, pmtu))
	if pmtu != ipipMTU {
		bad("no frag-needed at the IPIP MTU: path MTU %d, want %d", pmtu, ipipMTU)
	}

	// A packet on tunl0 with no route via it (node-4's address is routed
	// via the uplink): the kernel's tunnel sends it encapsulated toward the
	// destination itself, the emulation drops it; neither may put it on
	// the underlay as it is.
	noRouteDst := c.Node("node-4").NS.Address.Addr()
	var nr *net.UDPConn
	Expect(from.NS.NS.Do(func(ns.NetNS) error {
		var err error
		nr, err = net.ListenUDP("udp4", &net.UDPAddr{})
		if err != nil {
			return err
		}
		return bindToDevice(nr, topo.TunnelDevice)
	})).To(Succeed())
	for i := 0; i < 5; i++ {
		_, _ = nr.WriteToUDP([]byte("no route via tunl0"), &net.UDPAddr{IP: noRouteDst.AsSlice(), Port: noRoutePort})
	}
	nr.Close()

	st, err := capt.Stop()
	Expect(err).NotTo(HaveOccurred())
	rep.seen = append(rep.seen, fmt.Sprintf("capture on node-1 %s: %d packets", uplink.Name, st.Packets))

	f, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	rd, err := pcapgo.NewReader(f)
	Expect(err).NotTo(HaveOccurred())
	perCase := map[int]int{}
	for {
		data, _, err := rd.ReadPacketData()
		if err != nil {
			break
		}
		if len(data) < 14+20 || binary.BigEndian.Uint16(data[12:]) != 0x0800 {
			continue
		}
		o := parseIPv4Hdr(data[14:])
		if o.proto == unix.IPPROTO_UDP {
			sp, dp := udpPorts(data[14+o.hlen:])
			if dp == noRoutePort {
				bad("a packet to %s with no route via tunl0 left %s un-encapsulated", o.dst, uplink.Name)
			} else {
				bad("UDP %s:%d -> %s:%d left %s un-encapsulated (outer protocol 17, want 4)", o.src, sp, o.dst, dp, uplink.Name)
			}
			continue
		}
		if o.proto != 4 {
			continue
		}
		in := parseIPv4Hdr(data[14+o.hlen:])
		sp, dp := udpPorts(data[14+o.hlen+in.hlen:])
		if dp == noRoutePort {
			rep.seen = append(rep.seen, fmt.Sprintf("no-route packet encapsulated toward %s (the kernel's NBMA rule)", o.dst))
			continue
		}
		var wc *wireCase
		for i := range wireCases {
			if wireCases[i].srcPort == sp {
				wc = &wireCases[i]
			}
		}
		if wc == nil || dp != wirePort {
			continue
		}
		perCase[sp]++
		if perCase[sp] > 1 {
			continue // one of each is enough; the rest are retries
		}
		rep.seen = append(rep.seen, fmt.Sprintf("%s: outer %s -> %s proto %d tos %#02x ttl %d DF %v; inner tos %#02x ttl %d DF %v",
			wc.name, o.src, o.dst, o.proto, o.tos, o.ttl, o.df, in.tos, in.ttl, in.df))
		if o.src != outerSrc || o.dst != outerDst {
			bad("%s: outer %s -> %s, want %s -> %s", wc.name, o.src, o.dst, outerSrc, outerDst)
		}
		if in.ttl != uint8(wc.ttl-1) || o.ttl != in.ttl {
			bad("%s: outer TTL %d, inner %d; want both %d (inherited after forwarding)", wc.name, o.ttl, in.ttl, wc.ttl-1)
		}
		if o.tos != wc.wantTOS || in.tos != uint8(wc.tos) {
			bad("%s: outer TOS %#02x, inner %#02x; want %#02x and %#02x", wc.name, o.tos, in.tos, wc.wantTOS, wc.tos)
		}
		if o.df != wc.df || in.df != wc.df {
			bad("%s: outer DF %v, inner %v; want %v", wc.name, o.df, in.df, wc.df)
		}
		if !o.checksumOK || int(o.totLen) != int(in.totLen)+o.hlen {
			bad("%s: outer checksum ok %v, length %d for inner %d", wc.name, o.checksumOK, o.totLen, in.totLen)
		}
	}
	for _, wc := range wireCases {
		if perCase[wc.srcPort] == 0 {
			bad("%s: no encapsulated packet of the flow on %s", wc.name, uplink.Name)
		}
	}
	return rep
}

var _ = Describe("IPIP packets on the wire, as the kernel's fallback tunnel sends them", Label("ipip", "packets"), func() {
	It("encapsulates with protocol 4, the nodes' addresses, the inner TTL, DSCP 0 and the inner ECN, the inner DF; answers an oversized DF packet with frag-needed at 1480; leaks nothing", func(ctx SpecContext) {
		c := startCluster(ctx, "ipip", harness.Options{})
		rep := checkIPIPWire(ctx, c)
		AddReportEntry("tunl0", c.Net.Tunnel)
		for _, s := range rep.seen {
			AddReportEntry("on the wire", s)
		}
		Expect(rep.violations).To(BeEmpty(), "tunl0 is %s", c.Net.Tunnel)
	})

	It("fail for the emulation with its encapsulation disabled (negative control)", Label("control"), func(ctx SpecContext) {
		c := startCluster(ctx, "ipip", harness.Options{Tunnel: topo.TunnelEBPFNoEncap})
		rep := checkIPIPWire(ctx, c)
		for _, s := range rep.violations {
			AddReportEntry("violation (expected)", s)
		}
		Expect(rep.violations).To(ContainElement(ContainSubstring("outer protocol 17, want 4")), "the checks must catch packets that leave un-encapsulated")
	})

	It("fail for it in the encapsulation check of the specs that judge routes (negative control)", Label("control"), func(ctx SpecContext) {
		// The re-advertisement and cleanup specs judge routes; their
		// guard (expectIPIPEncapsulated) judges the hop counters. On the
		// emulation without encapsulation it must fail, naming a flow
		// between node-1 and node-2 — whose bare packets still arrive,
		// one lan apart, so delivery alone would not tell.
		c := startCluster(ctx, "ipip", harness.Options{Tunnel: topo.TunnelEBPFNoEncap})
		Expect(c.WaitConverged(ctx)).To(Succeed(), "guard: every BGP session Established")
		for _, n := range c.Nodes() {
			for _, b := range c.RemoteBlocks(n.Name) {
				Eventually(n).WithContext(ctx).WithTimeout(machine.Wait(30*time.Second)).WithPolling(50*time.Millisecond).
					Should(judge.HaveClusterRoute(b).Via(topo.TunnelDevice), "guard: %s routes %s via tunl0", n.Name, b)
			}
		}
		rep, _, err := ipipEncapBurst(ctx, c, nil, "no-encap emulation (expected to fail)")
		Expect(err).To(MatchError(encap.ErrNotEncapsulated), "the check must catch IPIP flows that cross the underlay bare")
		AddReportEntry("the check says (expected)", err.Error())
		Expect(err.Error()).To(SatisfyAll(ContainSubstring("node-1-w0->node-2-w0"), ContainSubstring("tunl0: "+topo.TunnelEBPFNoEncap)))
		delivered := false
		for _, f := range rep.Flows {
			if f.Flow == "node-1-w0->node-2-w0" {
				delivered = f.Received > 0
			}
		}
		Expect(delivered).To(BeTrue(), "guard: node-1 -> node-2 (one lan) delivers its bare packets, which is why delivery cannot be the check")
	})
})

type ipv4Fields struct {
	hlen            int
	tos, ttl, proto uint8
	totLen          uint16
	df, checksumOK  bool
	src, dst        netip.Addr
}

func parseIPv4Hdr(b []byte) ipv4Fields {
	hlen := int(b[0]&0x0f) * 4
	var sum uint32
	for i := 0; i+1 < hlen && i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ipv4Fields{
		hlen: hlen, tos: b[1], totLen: binary.BigEndian.Uint16(b[2:]), df: b[6]&0x40 != 0,
		ttl: b[8], proto: b[9], checksumOK: sum == 0xffff,
		src: netip.AddrFrom4([4]byte(b[12:16])), dst: netip.AddrFrom4([4]byte(b[16:20])),
	}
}

func udpPorts(b []byte) (src, dst int) {
	if len(b) < 4 {
		return 0, 0
	}
	return int(binary.BigEndian.Uint16(b[0:])), int(binary.BigEndian.Uint16(b[2:]))
}

// dialFrom is a UDP socket in n bound to src:sport, connected to dst:dport.
func dialFrom(n *topo.Workload, src netip.Addr, sport int, dst netip.Addr, dport int) *net.UDPConn {
	GinkgoHelper()
	var conn *net.UDPConn
	Expect(n.NS.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.DialUDP("udp4", &net.UDPAddr{IP: src.AsSlice(), Port: sport}, &net.UDPAddr{IP: dst.AsSlice(), Port: dport})
		return err
	})).To(Succeed())
	return conn
}

func setSockopts(conn *net.UDPConn, tos, ttl int, df bool) {
	GinkgoHelper()
	pmtu := unix.IP_PMTUDISC_DONT
	if df {
		pmtu = unix.IP_PMTUDISC_DO
	}
	raw, err := conn.SyscallConn()
	Expect(err).NotTo(HaveOccurred())
	var serr error
	Expect(raw.Control(func(fd uintptr) {
		for _, o := range [][2]int{{unix.IP_TOS, tos}, {unix.IP_TTL, ttl}, {unix.IP_MTU_DISCOVER, pmtu}} {
			if err := unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, o[0], o[1]); err != nil && serr == nil {
				serr = err
			}
		}
	})).To(Succeed())
	Expect(serr).NotTo(HaveOccurred())
}

func getsockoptInt(conn *net.UDPConn, level, opt int) int {
	raw, err := conn.SyscallConn()
	if err != nil {
		return -1
	}
	v := -1
	_ = raw.Control(func(fd uintptr) {
		if x, err := unix.GetsockoptInt(int(fd), level, opt); err == nil {
			v = x
		}
	})
	return v
}

func bindToDevice(conn *net.UDPConn, dev string) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = syscall.BindToDevice(int(fd), dev) }); err != nil {
		return err
	}
	return serr
}
