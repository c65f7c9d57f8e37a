package topo

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/birdcage/birdcage/internal/run"
)

func TestChooseTunnel(t *testing.T) {
	for _, c := range []struct {
		env      string
		kernel   bool
		ebpfOK   bool
		want     string // Features.Tunnel; "" with ipip false
		wantFail bool   // TunnelErr set: a build needing tunl0 fails, not skips
	}{
		{env: "", kernel: true, ebpfOK: true, want: TunnelKernel},
		{env: "", kernel: false, ebpfOK: true, want: TunnelEBPF},
		{env: "", kernel: false, ebpfOK: false, want: ""},
		{env: "kernel", kernel: false, ebpfOK: true, wantFail: true},
		{env: "kernel", kernel: true, want: TunnelKernel},
		{env: "ebpf", kernel: true, ebpfOK: true, want: TunnelEBPF},
		{env: "ebpf", kernel: true, ebpfOK: false, wantFail: true},
		{env: "ebpf-noencap", ebpfOK: true, want: TunnelEBPFNoEncap},
		{env: "vxlan", kernel: true, ebpfOK: true, wantFail: true},
	} {
		var eerr error
		if !c.ebpfOK {
			eerr = errTest
		}
		f, line := chooseTunnel(c.env, c.kernel, eerr)
		if f.Tunnel != c.want || f.IPIP != (c.want != "") || (f.TunnelErr != nil) != c.wantFail || line == "" {
			t.Errorf("env %q kernel %v ebpf %v: got %+v (%q), want tunnel %q, failing %v", c.env, c.kernel, c.ebpfOK, f, line, c.want, c.wantFail)
		}
	}
}

type testErr struct{}

func (testErr) Error() string { return "test" }

var errTest error = testErr{}

// routeBlocksViaTunl0 gives every node a route to every other node's blocks
// via tunl0 onlink toward that node's address, as the programmer writes
// them.
func routeBlocksViaTunl0(t *testing.T, n *Network) {
	t.Helper()
	for _, nd := range n.Nodes {
		h, err := nd.Handle()
		if err != nil {
			t.Fatal(err)
		}
		tl, err := h.LinkByName(TunnelDevice)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range n.Nodes {
			if other == nd {
				continue
			}
			for _, b := range other.Blocks {
				rt := &netlink.Route{Dst: prefixToNet(b.CIDR), Gw: other.Address.Addr().AsSlice(), LinkIndex: tl.Attrs().Index, Flags: int(netlink.FLAG_ONLINK)}
				if err := h.RouteReplace(rt); err != nil {
					t.Fatalf("%s: route %s via %s dev tunl0 onlink: %v", nd.Name, b.CIDR, other.Address.Addr(), err)
				}
			}
		}
		h.Close()
	}
}

func buildIPIP(t *testing.T, f *Features) *Network {
	t.Helper()
	requireRoot(t)
	tp, err := Builtin("ipip")
	if err != nil {
		t.Fatal(err)
	}
	r, err := run.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
		assertNothingLeft(t, r.Prefix)
	})
	n, err := Build(context.Background(), tp, r, Options{Features: f})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The emulated tunl0 carries workload traffic across a router that has no
// pod routes, with the programmer's route shape (via NODE dev tunl0
// onlink); it is a NOARP device with the IPIP MTU and no IPv6.
func TestEmulatedTunnelCarriesIPIP(t *testing.T) {
	n := buildIPIP(t, &Features{IPIP: true, Tunnel: TunnelEBPF})
	if n.Tunnel != TunnelEBPF || !n.Nodes[0].Tunnel || n.Nodes[0].TunnelMode != TunnelEBPF {
		t.Fatalf("network tunnel %q, node %v %q; want ebpf", n.Tunnel, n.Nodes[0].Tunnel, n.Nodes[0].TunnelMode)
	}
	h, err := n.Nodes[0].Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tl, err := h.LinkByName(TunnelDevice)
	if err != nil {
		t.Fatal(err)
	}
	if a := tl.Attrs(); a.MTU != 1480 || a.RawFlags&unixIFFNOARP == 0 || a.Flags&net.FlagUp == 0 {
		t.Errorf("tunl0: mtu %d flags %v raw %#x; want 1480, up, NOARP", a.MTU, a.Flags, a.RawFlags)
	}
	if addrs, _ := h.AddrList(tl, netlink.FAMILY_V6); len(addrs) != 0 {
		t.Errorf("tunl0 has IPv6 addresses %v; the kernel's has none", addrs)
	}
	if addrs, _ := h.AddrList(tl, netlink.FAMILY_V4); len(addrs) != 1 || netip.MustParsePrefix(addrs[0].IPNet.String()).Addr() != n.Nodes[0].Blocks[0].CIDR.Addr() {
		t.Errorf("tunl0 addresses %v; want the first of block %s", addrs, n.Nodes[0].Blocks[0].CIDR)
	}
	assertCrossNodeUnreachable(t, n)
	routeBlocksViaTunl0(t, n)
	assertAllWorkloadsReachable(t, n)
}

// The negative control: without encapsulation the same routes carry
// nothing across the router (it has no pod routes), so the reachability
// check above would fail.
func TestEmulatedTunnelNoEncapFailsAcrossRouter(t *testing.T) {
	n := buildIPIP(t, &Features{IPIP: true, Tunnel: TunnelEBPFNoEncap})
	routeBlocksViaTunl0(t, n)
	src, dst := n.Nodes[0].Workloads[0], n.Nodes[2].Workloads[0] // lan-a -> lan-b
	var sc, dc *net.UDPConn
	for _, x := range []struct {
		wl *Workload
		c  **net.UDPConn
	}{{src, &sc}, {dst, &dc}} {
		if err := x.wl.NS.Do(func(ns.NetNS) error {
			var err error
			*x.c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: x.wl.IPv4.AsSlice(), Port: 7777})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer (*x.c).Close()
	}
	if err := echo(sc, dc, dst.IPv4); err == nil {
		t.Fatalf("%s reached %s across the router without encapsulation", src.Name, dst.Name)
	}
}

const unixIFFNOARP = 0x80
