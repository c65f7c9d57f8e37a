package bpf

// The emulated tunnel's contract, packet by packet (BPF_PROG_TEST_RUN on
// crafted frames, in a namespace shaped like a node) and end to end (two
// nodes whose tunl0s are emulated, a UDP exchange between the tunnel
// addresses). What "as the kernel's ipip" means is written in tunnel.c.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/testenv"
)

const (
	tcActShot     = 2
	tcActRedirect = 7
)

// emulatedTunl0 makes the NOARP veth tunl0 (peer tunl0-peer in the same
// namespace) with addr, up, and returns it.
func emulatedTunl0(t *testing.T, h *netlink.Handle, addr string) netlink.Link {
	t.Helper()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "tunl0", MTU: 1480, Flags: net.FlagUp}, PeerName: "tunl0-peer"}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatalf("add tunl0 veth: %v", err)
	}
	for _, n := range []string{"tunl0", "tunl0-peer"} {
		l, err := h.LinkByName(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetARPOff(l); err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	l, err := h.LinkByName("tunl0")
	if err != nil {
		t.Fatal(err)
	}
	if addr != "" {
		a, _ := netlink.ParseAddr(addr)
		if err := h.AddrAdd(l, a); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func mustRoute(t *testing.T, h *netlink.Handle, dst, gw string, l netlink.Link, onlink bool) {
	t.Helper()
	_, d, _ := net.ParseCIDR(dst)
	r := &netlink.Route{Dst: d, Gw: net.ParseIP(gw), LinkIndex: l.Attrs().Index}
	if onlink {
		r.Flags = int(netlink.FLAG_ONLINK)
	}
	if err := h.RouteAdd(r); err != nil {
		t.Fatalf("route %s via %s dev %s: %v", dst, gw, l.Attrs().Name, err)
	}
}

// tunnelNode is one side of vethPair made into a node: a0/b0 is its
// underlay, tunl0 is emulated, routes to the other side's pod block go via
// tunl0 onlink, and it forwards.
type tunnelNode struct {
	ns     ns.NetNS
	h      *netlink.Handle
	tunl0  netlink.Link
	under  netlink.Link
	tunnel *Tunnel
}

func makeTunnelNode(t *testing.T, n ns.NetNS, under, tunlAddr, remoteBlock, remoteGW string, noEncap bool) *tunnelNode {
	t.Helper()
	h, err := nsutil.Handle(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	if err := nsutil.SetSysctls(n, map[string]string{"net/ipv4/ip_forward": "1", "net/ipv4/conf/all/rp_filter": "0", "net/ipv4/conf/default/rp_filter": "0"}); err != nil {
		t.Fatal(err)
	}
	tn := &tunnelNode{ns: n, h: h}
	tn.tunl0 = emulatedTunl0(t, h, tunlAddr)
	tn.under, err = h.LinkByName(under)
	if err != nil {
		t.Fatal(err)
	}
	mustRoute(t, h, remoteBlock, remoteGW, tn.tunl0, true)
	tn.tunnel, err = AttachTunnel(TunnelOptions{Netns: n.Path(), Device: "tunl0", Peer: "tunl0-peer", Underlays: []string{under}, NoEncap: noEncap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tn.tunnel.Close(); err != nil {
			t.Error(err)
		}
	})
	return tn
}

// skbCtx is the start of struct __sk_buff up to ifindex: the fields
// BPF_PROG_TEST_RUN takes are zero apart from ingress_ifindex and ifindex.
func skbCtx(ingress, ifindex int) []byte {
	b := make([]byte, 44)
	binary.NativeEndian.PutUint32(b[36:], uint32(ingress))
	binary.NativeEndian.PutUint32(b[40:], uint32(ifindex))
	return b
}

func runIn(t *testing.T, n ns.NetNS, p *ebpf.Program, frame, ctx []byte) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(frame)+256)
	var ret uint32
	err := n.Do(func(ns.NetNS) error {
		var err error
		ret, err = p.Run(&ebpf.RunOptions{Data: frame, DataOut: out, Context: ctx})
		return err
	})
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, out
}

// ipv4Hdr is a parsed IPv4 header.
type ipv4Hdr struct {
	tos, ttl, proto uint8
	totLen, frag    uint16
	src, dst        netip.Addr
	checksumOK      bool
}

func parseIPv4(b []byte) ipv4Hdr {
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ipv4Hdr{
		tos: b[1], totLen: binary.BigEndian.Uint16(b[2:]), frag: binary.BigEndian.Uint16(b[6:]),
		ttl: b[8], proto: b[9],
		src: netip.AddrFrom4([4]byte(b[12:16])), dst: netip.AddrFrom4([4]byte(b[16:20])),
		checksumOK: sum == 0xffff,
	}
}

// innerFrame is an Ethernet frame with a UDP packet src->dst, the given TOS
// and TTL, DF set or not.
func innerFrame(src, dst string, tos, ttl uint8, df bool) []byte {
	ip := ipv4(netip.MustParseAddr(src), netip.MustParseAddr(dst), 17, false, make([]byte, 8+ProbeLen))
	ip[1], ip[8] = tos, ttl
	if df {
		binary.BigEndian.PutUint16(ip[6:], 0x4000)
	}
	fixChecksum(ip)
	return append(ethHeader(0x0800), ip...)
}

func fixChecksum(ip []byte) {
	ip[10], ip[11] = 0, 0
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
}

func ethHeader(etherType uint16) []byte {
	h := make([]byte, 14)
	copy(h[0:6], []byte{2, 0, 0, 0, 0, 1})
	copy(h[6:12], []byte{2, 0, 0, 0, 0, 2})
	binary.BigEndian.PutUint16(h[12:], etherType)
	return h
}

func TestTunnelPackets(t *testing.T) {
	a, b := vethPair(t) // a0 10.199.0.1/24 <-> b0 10.199.0.2/24
	_ = b
	node := makeTunnelNode(t, a, "a0", "10.244.0.1/32", "10.244.1.0/26", "10.199.0.2", false)
	// A route that exists but not via tunl0: such a packet is never the
	// tunnel's, even if it was queued on it.
	_, other, _ := net.ParseCIDR("10.98.0.0/16")
	if err := node.h.RouteAdd(&netlink.Route{Dst: other, Gw: net.ParseIP("10.199.0.2"), LinkIndex: node.under.Attrs().Index}); err != nil {
		t.Fatal(err)
	}
	encap := node.tunnel.coll.Programs[tunnelProgTunnelEncap]
	decap := node.tunnel.coll.Programs[tunnelProgTunnelDecap]
	tunIdx, underIdx := node.tunl0.Attrs().Index, node.under.Attrs().Index

	type want struct {
		tos, ttl uint8
		df       bool
	}
	for _, c := range []struct {
		name     string
		tos, ttl uint8
		df       bool
		want     want
	}{
		// Fallback tunnel: ttl 0 (inherit), tos 0 (DSCP 0, inner ECN with
		// CE sent as ECT(0)), pmtudisc off (DF from the inner header).
		{name: "plain", tos: 0, ttl: 63, df: false, want: want{tos: 0, ttl: 63}},
		{name: "DF and DSCP", tos: 0xb8, ttl: 7, df: true, want: want{tos: 0, ttl: 7, df: true}},
		{name: "ECT(1)", tos: 0x01, ttl: 64, want: want{tos: 0x01, ttl: 64}},
		{name: "CE", tos: 0x2b, ttl: 64, df: true, want: want{tos: 0x02, ttl: 64, df: true}},
	} {
		t.Run("encap "+c.name, func(t *testing.T) {
			frame := innerFrame("10.244.0.5", "10.244.1.5", c.tos, c.ttl, c.df)
			ret, out := runIn(t, a, encap, frame, skbCtx(0, tunIdx))
			if ret != tcActRedirect {
				t.Fatalf("return %d, want TC_ACT_REDIRECT", ret)
			}
			o := parseIPv4(out[14:])
			if o.proto != 4 || o.src != netip.MustParseAddr("10.199.0.1") || o.dst != netip.MustParseAddr("10.199.0.2") {
				t.Errorf("outer %s->%s proto %d, want 10.199.0.1->10.199.0.2 proto 4", o.src, o.dst, o.proto)
			}
			if o.tos != c.want.tos || o.ttl != c.want.ttl || (o.frag&0x4000 != 0) != c.want.df || o.frag&0xbfff != 0 {
				t.Errorf("outer tos %#x ttl %d frag %#x, want tos %#x ttl %d DF %v", o.tos, o.ttl, o.frag, c.want.tos, c.want.ttl, c.want.df)
			}
			if !o.checksumOK || int(o.totLen) != len(frame)-14+20 {
				t.Errorf("outer checksum ok %v, length %d (inner %d)", o.checksumOK, o.totLen, len(frame)-14)
			}
			if !bytes.Equal(out[34:34+len(frame)-14], frame[14:]) {
				t.Errorf("inner packet changed")
			}
		})
	}

	t.Run("dropped, not leaked", func(t *testing.T) {
		before, _ := node.tunnel.Stats()
		for _, dst := range []string{"10.98.1.1", "10.97.0.1"} { // a route not via tunl0; no route
			if ret, _ := runIn(t, a, encap, innerFrame("10.244.0.5", dst, 0, 64, false), skbCtx(0, tunIdx)); ret != tcActShot {
				t.Errorf("to %s: return %d, want TC_ACT_SHOT", dst, ret)
			}
		}
		v6 := pkt{src: v6a, dst: v6b}.frame()
		if ret, _ := runIn(t, a, encap, v6, skbCtx(0, tunIdx)); ret != tcActShot {
			t.Errorf("IPv6: return %d, want TC_ACT_SHOT", ret)
		}
		after, _ := node.tunnel.Stats()
		if after.NoRoute-before.NoRoute != 2 || after.NotIPv4-before.NotIPv4 != 1 {
			t.Errorf("stats %+v -> %+v, want 2 more no-route, 1 more not-IPv4", before, after)
		}
	})

	outer := func(src, dst string, tos uint8, inner []byte) []byte {
		ip := ipv4(netip.MustParseAddr(src), netip.MustParseAddr(dst), 4, false, inner)
		ip[1] = tos
		fixChecksum(ip)
		return append(ethHeader(0x0800), ip...)
	}
	t.Run("decap", func(t *testing.T) {
		for _, c := range []struct {
			name               string
			outerTOS, innerTOS uint8
			wantRet            uint32
			wantInnerTOS       uint8
		}{
			{name: "plain", outerTOS: 0, innerTOS: 0x10, wantRet: tcActRedirect, wantInnerTOS: 0x10},
			{name: "CE on ECT(0)", outerTOS: 0x03, innerTOS: 0x02, wantRet: tcActRedirect, wantInnerTOS: 0x03},
			{name: "CE on Not-ECT", outerTOS: 0x03, innerTOS: 0x00, wantRet: tcActShot},
		} {
			inner := innerFrame("10.244.1.5", "10.244.0.5", c.innerTOS, 62, true)[14:]
			ret, out := runIn(t, a, decap, outer("10.199.0.2", "10.199.0.1", c.outerTOS, inner), skbCtx(underIdx, underIdx))
			if ret != c.wantRet {
				t.Errorf("%s: return %d, want %d", c.name, ret, c.wantRet)
				continue
			}
			if ret != tcActRedirect {
				continue
			}
			if !bytes.Equal(out[0:6], node.tunl0.Attrs().HardwareAddr) {
				t.Errorf("%s: destination MAC %x, want tunl0's %s", c.name, out[0:6], node.tunl0.Attrs().HardwareAddr)
			}
			got := parseIPv4(out[14:])
			want := parseIPv4(inner)
			want.tos = c.wantInnerTOS
			if got != want || !bytes.Equal(out[34:14+len(inner)], inner[20:]) {
				t.Errorf("%s: inner after decap %+v, want %+v", c.name, got, want)
			}
		}
		// Not for the node (it would forward it), or not IPIP: left alone.
		inner := innerFrame("10.244.1.5", "10.244.0.5", 0, 62, false)[14:]
		for name, f := range map[string][]byte{
			"transit": outer("10.199.0.2", "10.98.0.9", 0, inner),
			"UDP":     innerFrame("10.199.0.2", "10.199.0.1", 0, 64, false),
		} {
			if ret, _ := runIn(t, a, decap, f, skbCtx(underIdx, underIdx)); ret != tcActUnspec {
				t.Errorf("%s: return %d, want TC_ACT_UNSPEC", name, ret)
			}
		}
	})
}

func TestTunnelNoEncapSendsPlain(t *testing.T) {
	a, _ := vethPair(t)
	node := makeTunnelNode(t, a, "a0", "10.244.0.1/32", "10.244.1.0/26", "10.199.0.2", true)
	frame := innerFrame("10.244.0.5", "10.244.1.5", 0, 63, false)
	ret, out := runIn(t, a, node.tunnel.coll.Programs[tunnelProgTunnelEncap], frame, skbCtx(0, node.tunl0.Attrs().Index))
	if ret != tcActRedirect || !bytes.Equal(out[:len(frame)], frame) {
		t.Fatalf("return %d, frame changed %v; want a redirect of the unchanged frame", ret, !bytes.Equal(out[:len(frame)], frame))
	}
}

// TestTunnelEndToEnd: two nodes, each with an emulated tunl0; a UDP
// exchange between the tunnel addresses crosses the underlay encapsulated
// both ways, and the counters on the underlay see protocol 4 with the inner
// flow inside.
func TestTunnelEndToEnd(t *testing.T) {
	a, b := vethPair(t)
	na := makeTunnelNode(t, a, "a0", "10.244.0.1/32", "10.244.1.0/26", "10.199.0.2", false)
	nb := makeTunnelNode(t, b, "b0", "10.244.1.1/32", "10.244.0.0/26", "10.199.0.1", false)
	under, err := Attach(AttachOptions{Netns: b.Path(), Iface: "b0", Direction: Ingress})
	if err != nil {
		t.Fatal(err)
	}
	defer under.Close()
	tunIn, err := Attach(AttachOptions{Netns: b.Path(), Iface: "tunl0", Direction: Ingress})
	if err != nil {
		t.Fatal(err)
	}
	defer tunIn.Close()

	var srv, cli *net.UDPConn
	if err := b.Do(func(ns.NetNS) error {
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP("10.244.1.1"), Port: 47001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := a.Do(func(ns.NetNS) error {
		cli, err = net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP("10.244.0.1")}, &net.UDPAddr{IP: net.ParseIP("10.244.1.1"), Port: 47001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	_ = srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := srv.ReadFromUDP(buf)
	if err != nil {
		sa, _ := na.tunnel.Stats()
		sb, _ := nb.tunnel.Stats()
		t.Fatalf("no datagram through the tunnel: %v (a: %+v, b: %+v)", err, sa, sb)
	}
	if string(buf[:n]) != "ping" || from.IP.String() != "10.244.0.1" {
		t.Fatalf("got %q from %s", buf[:n], from)
	}
	if _, err := srv.WriteToUDP([]byte("pong"), from); err != nil {
		t.Fatal(err)
	}
	_ = cli.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err = cli.Read(buf); err != nil || string(buf[:n]) != "pong" {
		sa, _ := na.tunnel.Stats()
		sb, _ := nb.tunnel.Stats()
		t.Fatalf("no reply through the tunnel: %v %q (a: %+v, b: %+v)", err, buf[:n], sa, sb)
	}
	outerKey := FlowKey{Src: netip.MustParseAddr("10.199.0.1"), Dst: netip.MustParseAddr("10.199.0.2"), Proto: 4}
	innerKey := FlowKey{Src: netip.MustParseAddr("10.244.0.1"), Dst: netip.MustParseAddr("10.244.1.1"), Proto: 17}
	for _, c := range []struct {
		where string
		c     *Counter
		k     FlowKey
	}{
		{"b0 ingress, outer", under, outerKey},
		{"b0 ingress, inner", under, FlowKey{Src: innerKey.Src, Dst: innerKey.Dst, Proto: 17, Inner: true}},
		{"tunl0 ingress", tunIn, innerKey},
	} {
		fc, err := c.c.Flow(c.k)
		if err != nil {
			t.Fatal(err)
		}
		if fc.Packets != 1 {
			t.Errorf("%s: %d packets of %s, want 1", c.where, fc.Packets, c.k.describe())
		}
	}
	sa, _ := na.tunnel.Stats()
	sb, _ := nb.tunnel.Stats()
	if sa.Encap != 1 || sa.Decap != 1 || sb.Encap != 1 || sb.Decap != 1 {
		t.Errorf("tunnel stats a %+v, b %+v; want one encap and one decap each", sa, sb)
	}
}

// The programs load and attach in both modes without a namespace shaped
// like a node (TCX and the clsact fallback).
func TestTunnelAttachModes(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		n := testenv.NewNetNS(t, "tunattach")
		tl := emulatedTunl0(t, n.Handle, "")
		_ = tl
		tun, err := AttachTunnel(TunnelOptions{Netns: n.NS.Path(), Device: "tunl0", Peer: "tunl0-peer", Underlays: []string{"tunl0"}, Legacy: legacy})
		if err != nil {
			t.Fatal(err)
		}
		want := ModeTCX
		if legacy {
			want = ModeClsact
		}
		if tun.Mode() != want {
			t.Errorf("legacy %v: mode %s, want %s", legacy, tun.Mode(), want)
		}
		if err := tun.Close(); err != nil {
			t.Error(err)
		}
		if qs, _ := n.Handle.QdiscList(tl); legacy && len(qs) > 0 {
			for _, q := range qs {
				if q.Type() == "clsact" {
					t.Errorf("clsact qdisc left on tunl0 after Close")
				}
			}
		}
	}
}

// The helper proof passes on a kernel the tunnel works on, and each probe
// reaches the check after the flags' (the errno a kernel that knows the
// flag gives), so EINVAL can only mean the flag.
func TestTunnelHelpersWork(t *testing.T) {
	testenv.NeedRoot(t)
	if err := TunnelHelpersWork(); err != nil {
		if errors.Is(err, ErrTunnelHelpers) {
			testenv.Missing(t, "ebpf-tunnel", err.Error())
		}
		t.Fatal(err)
	}
	for _, f := range tunnelFlags {
		errno, err := runProbe(f.probe)
		if err != nil {
			t.Fatal(err)
		}
		want := errENOTSUPP
		if strings.HasPrefix(f.name, "bpf_fib_lookup") {
			want = unix.EAFNOSUPPORT
		}
		if errno != want {
			t.Errorf("%s: the probe answered %v (%d), want %v: it does not reach the check after the flags'", f.name, errno, int(errno), want)
		}
	}
	// Negative control: a flag no kernel has is refused with EINVAL by
	// both probes, as an unknown one on an older kernel is.
	for what, insns := range map[string]asm.Instructions{"bpf_fib_lookup": fibLookupWith(1 << 30), "bpf_skb_adjust_room": adjustRoomWith(1 << 30)} {
		if errno, err := runProbe(insns); err != nil || errno != unix.EINVAL {
			t.Errorf("%s with flag 1<<30: errno %v, err %v; want EINVAL", what, errno, err)
		}
	}
}
