package bpf

// Attach must put the counter on the named interface inside the named
// namespace (never a host interface with the same ifindex), in both modes,
// and Close must leave nothing behind: legacy filters outlive the process.

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// vethPair makes two namespaces joined by a veth a0 (10.199.0.1/24) <-> b0
// (10.199.0.2/24), created inside the namespaces, never in the root one.
func vethPair(t *testing.T) (a, b ns.NetNS) {
	t.Helper()
	r := testenv.NewRun(t)
	a, b = testenv.NetNSIn(t, r, "a").NS, testenv.NetNSIn(t, r, "b").NS
	ha, err := nsutil.Handle(a)
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	hb, err := nsutil.Handle(b)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "a0"}, PeerName: "b0", PeerNamespace: netlink.NsFd(b.Fd())}
	if err := ha.LinkAdd(veth); err != nil {
		t.Fatalf("add veth a0/b0 in %s: %v", a.Path(), err)
	}
	for _, s := range []struct {
		h    *netlink.Handle
		name string
		addr string
	}{{ha, "a0", "10.199.0.1/24"}, {hb, "b0", "10.199.0.2/24"}} {
		l, err := s.h.LinkByName(s.name)
		if err != nil {
			t.Fatal(err)
		}
		addr, _ := netlink.ParseAddr(s.addr)
		if err := s.h.AddrAdd(l, addr); err != nil {
			t.Fatalf("address %s on %s: %v", s.addr, s.name, err)
		}
		if err := s.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// sendProbes sends n probes from a (10.199.0.1) to b (10.199.0.2).
func sendProbes(t *testing.T, a ns.NetNS, n int) {
	t.Helper()
	var conn *net.UDPConn
	err := a.Do(func(ns.NetNS) error {
		var err error
		// Unconnected: ICMP port unreachable (nobody listens in b) must not
		// turn later sends into ECONNREFUSED.
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP("10.199.0.1")})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dst := &net.UDPAddr{IP: net.ParseIP("10.199.0.2"), Port: 47999}
	buf := make([]byte, ProbeLen)
	for seq := 1; seq <= n; seq++ {
		PutProbe(buf, uint64(seq), 0)
		if _, err := conn.WriteToUDP(buf, dst); err != nil {
			t.Fatalf("send probe %d: %v", seq, err)
		}
	}
}

// waitReceived polls the tracker until it saw want probes.
func waitReceived(t *testing.T, c *Counter, want uint64) ProbeTrack {
	t.Helper()
	src, dst := netip.MustParseAddr("10.199.0.1"), netip.MustParseAddr("10.199.0.2")
	deadline := time.Now().Add(5 * time.Second)
	for {
		tr, _, err := c.ProbeTrack(src, dst, false)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Received >= want || time.Now().After(deadline) {
			return tr
		}
		<-time.After(5 * time.Millisecond) // polling interval
	}
}

func TestAttachInNetns(t *testing.T) {
	needRoot(t)
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprintf("legacy=%v", legacy), func(t *testing.T) {
			// 1. Two namespaces, counter at b0 ingress.
			a, b := vethPair(t)
			c, err := Attach(AttachOptions{Netns: b.Path(), Iface: "b0", Direction: Ingress, Legacy: legacy})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			wantMode := ModeTCX
			if legacy {
				wantMode = ModeClsact
			}
			if c.Mode() != wantMode {
				t.Errorf("attached as %q, want %q", c.Mode(), wantMode)
			}
			// 2. Probes from a reach the counter in b.
			sendProbes(t, a, 20)
			if tr := waitReceived(t, c, 20); tr.Received != 20 || tr.Missing != 0 {
				t.Errorf("counter at b0 ingress: %+v, want 20 probes received, none missing", tr)
			}
			// 3. Close leaves no program on the hook.
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			hb, err := nsutil.Handle(b)
			if err != nil {
				t.Fatal(err)
			}
			defer hb.Close()
			l, err := hb.LinkByName("b0")
			if err != nil {
				t.Fatal(err)
			}
			if legacy {
				fs, err := hb.FilterList(l, netlink.HANDLE_MIN_INGRESS)
				if err != nil {
					t.Fatal(err)
				}
				qs, err := hb.QdiscList(l)
				if err != nil {
					t.Fatal(err)
				}
				for _, q := range qs {
					if q.Type() == "clsact" {
						t.Errorf("clsact qdisc left on b0 after Close")
					}
				}
				if len(fs) != 0 {
					t.Errorf("%d filters left on b0 ingress after Close", len(fs))
				}
				return
			}
			err = b.Do(func(ns.NetNS) error {
				res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: ebpf.AttachTCXIngress})
				if err != nil {
					return err
				}
				if len(res.Programs) != 0 {
					return fmt.Errorf("%d TCX programs left on b0 ingress after Close", len(res.Programs))
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
}

// Two legacy counters on one device (ingress and egress, as a probe hop
// pair) share the clsact qdisc the first added: whichever closes first,
// the device is left without it — the lab's before/after comparison
// caught the one closing order that left it behind.
func TestLegacyCountersSharingAQdiscLeaveNone(t *testing.T) {
	needRoot(t)
	for _, first := range []Direction{Ingress, Egress} {
		t.Run("first closed "+first.String(), func(t *testing.T) {
			_, b := vethPair(t)
			cs := map[Direction]*Counter{}
			for _, d := range []Direction{Ingress, Egress} {
				c, err := Attach(AttachOptions{Netns: b.Path(), Iface: "b0", Direction: d, Legacy: true})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				cs[d] = c
			}
			hb, err := nsutil.Handle(b)
			if err != nil {
				t.Fatal(err)
			}
			defer hb.Close()
			l, err := hb.LinkByName("b0")
			if err != nil {
				t.Fatal(err)
			}
			clsacts := func() int {
				qs, err := hb.QdiscList(l)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, q := range qs {
					if q.Type() == "clsact" {
						n++
					}
				}
				return n
			}
			if clsacts() != 1 {
				t.Fatalf("guard: %d clsact qdiscs on b0 while both counters are attached, want 1", clsacts())
			}
			second := Egress
			if first == Egress {
				second = Ingress
			}
			if err := cs[first].Close(); err != nil {
				t.Fatal(err)
			}
			if clsacts() != 1 {
				t.Fatalf("the qdisc went while the %s counter still hangs on it", second)
			}
			if err := cs[second].Close(); err != nil {
				t.Fatal(err)
			}
			if n := clsacts(); n != 0 {
				t.Errorf("%d clsact qdiscs left on b0 after both counters closed", n)
			}
		})
	}
}
