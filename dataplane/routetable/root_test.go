package routetable

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// testNode is one throwaway network namespace shaped like a node: uplinks
// eth0 (10.0.1.11/24, fd00:1::11/64) and eth1 (10.0.2.11/24), a foreign
// device ext0, and tunl0 — the real ipip fallback device where the kernel
// has ipip (the VM runner), else a veth named tunl0 standing in for it.
type testNode struct {
	ns       ns.NetNS
	name     string
	h        *netlink.Handle
	realIPIP bool
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and writes routes in them")
	}
}

func newTestNode(t testing.TB) *testNode {
	t.Helper()
	requireRoot(t)
	r, err := run.New()
	if err != nil {
		t.Fatalf("new run: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	name := r.Name("rt")
	n, err := nsutil.Create(name)
	if err != nil {
		t.Fatalf("create netns: %v", err)
	}
	r.Defer("netns "+name, func() error { n.Close(); return nsutil.Delete(name) })
	h, err := nsutil.Handle(n)
	if err != nil {
		t.Fatal(err)
	}
	r.Defer("netlink handle in "+name, func() error { h.Close(); return nil })
	tn := &testNode{ns: n, name: name, h: h}

	veth := func(name, peer string, addrs ...string) {
		t.Helper()
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}); err != nil {
			t.Fatalf("add veth %s in %s: %v", name, tn.name, err)
		}
		for _, dev := range []string{name, peer} {
			l, err := h.LinkByName(dev)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.LinkSetUp(l); err != nil {
				t.Fatalf("up %s: %v", dev, err)
			}
		}
		l, _ := h.LinkByName(name)
		for _, a := range addrs {
			ad, _ := netlink.ParseAddr(a)
			ad.Flags = 0x80 // IFA_F_NODAD: usable at once
			if err := h.AddrAdd(l, ad); err != nil {
				t.Fatalf("addr %s on %s: %v", a, name, err)
			}
		}
	}
	veth("eth0", "eth0p", "10.0.1.11/24", "fd00:1::11/64")
	veth("eth1", "eth1p", "10.0.2.11/24")
	veth("ext0", "ext0p", "10.9.0.1/24")
	if l, err := h.LinkByName("tunl0"); err == nil && l.Type() == "ipip" {
		tn.realIPIP = true
		if err := h.LinkSetUp(l); err != nil {
			t.Fatalf("up tunl0: %v", err)
		}
	} else {
		veth("tunl0", "tunl0p")
	}
	return tn
}

// table opens a route table for the node's namespace, closed at the end of
// the test.
func (tn *testNode) table(t testing.TB, policy OwnershipPolicy, log *slog.Logger) *Table {
	t.Helper()
	tb, err := Open(netns.NsHandle(tn.ns.Fd()), policy, log)
	if err != nil {
		t.Fatalf("open route table in %s: %v", tn.name, err)
	}
	t.Cleanup(tb.Close)
	return tb
}

func (tn *testNode) ifindex(t testing.TB, dev string) int {
	t.Helper()
	l, err := tn.h.LinkByName(dev)
	if err != nil {
		t.Fatalf("link %s: %v", dev, err)
	}
	return l.Attrs().Index
}

// addRoute writes a route the way another component would (BIRD: proto 12).
func (tn *testNode) addRoute(t testing.TB, dst, gw, dev string, proto, metric int, onlink bool) {
	t.Helper()
	_, ipn, _ := net.ParseCIDR(dst)
	r := &netlink.Route{Dst: ipn, Gw: net.ParseIP(gw), LinkIndex: tn.ifindex(t, dev), Protocol: netlink.RouteProtocol(proto), Priority: metric}
	if onlink {
		r.Flags = int(netlink.FLAG_ONLINK)
	}
	if err := tn.h.RouteAdd(r); err != nil {
		t.Fatalf("add %s via %s dev %s proto %d: %v", dst, gw, dev, proto, err)
	}
}

// kernel dumps the main table's routes, as the table sees them.
func (tn *testNode) kernel(t testing.TB) map[key]kroute.Route {
	t.Helper()
	tb := tn.table(t, OwnershipPolicy{}, nil)
	links, err := tb.readLinks()
	if err != nil {
		t.Fatal(err)
	}
	all, err := tb.readKernel(links)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// routes returns the main-table routes to dst, as the table sees them.
func (tn *testNode) routes(t testing.TB, dst string) []kroute.Route {
	t.Helper()
	p := netip.MustParsePrefix(dst)
	var out []kroute.Route
	for _, k := range tn.kernel(t) {
		if k.Dst == p {
			out = append(out, k)
		}
	}
	return out
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testLog logs through t.Log so a failing test shows what the table did.
func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }
