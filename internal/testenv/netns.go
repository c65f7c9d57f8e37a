package testenv

import (
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/run"
)

// NetNS is a network namespace one test owns: named with a run's prefix and
// removed, with everything in it, when the test ends (failed or not).
type NetNS struct {
	Run    *run.Run
	Name   string
	NS     ns.NetNS
	Handle *netlink.Handle
}

// NewNetNS creates the namespace in a run of its own (tag names it inside
// the run's prefix); it skips without root, as NeedRoot does.
func NewNetNS(t testing.TB, tag string) *NetNS {
	t.Helper()
	return NetNSIn(t, NewRun(t), tag)
}

// NewRun is a run for one test, closed (everything it created removed) when
// the test ends; it skips without root.
func NewRun(t testing.TB) *run.Run {
	t.Helper()
	NeedRoot(t)
	r, err := run.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// NetNSIn creates a namespace in run r (several namespaces of one test
// share a run), removed when r closes.
func NetNSIn(t testing.TB, r *run.Run, tag string) *NetNS {
	t.Helper()
	name := r.Name(tag)
	n, err := nsutil.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	r.Defer("netns "+name, func() error { n.Close(); return nsutil.Delete(name) })
	h, err := nsutil.Handle(n)
	if err != nil {
		t.Fatal(err)
	}
	r.Defer("netlink handle", func() error { h.Close(); return nil })
	return &NetNS{Run: r, Name: name, NS: n, Handle: h}
}

// Veth adds a veth pair inside the namespace, sets both ends up and gives
// name the addresses (CIDR strings); it returns name's link.
func (n *NetNS) Veth(t testing.TB, name, peer string, addrs ...string) netlink.Link {
	t.Helper()
	h := n.Handle
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}); err != nil {
		t.Fatalf("netns %s: add veth %s/%s: %v", n.Name, name, peer, err)
	}
	for _, d := range []string{peer, name} {
		l, err := h.LinkByName(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatalf("netns %s: set %s up: %v", n.Name, d, err)
		}
	}
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ad, err := netlink.ParseAddr(a)
		if err != nil {
			t.Fatalf("netns %s: address %q: %v", n.Name, a, err)
		}
		if err := h.AddrAdd(l, ad); err != nil {
			t.Fatalf("netns %s: add %s to %s: %v", n.Name, a, name, err)
		}
	}
	return l
}
