package bird_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// requireRoot skips a test that needs root, bird and runc.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and runc containers")
	}
	for _, b := range []string{"bird", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("needs %s (Debian packages bird2 and runc): %v", b, err)
		}
	}
}

// lab is a small hand-made fixture: named namespaces carrying the run
// prefix, links made inside them (never in the root namespace).
type lab struct {
	t  *testing.T
	r  *run.Run
	ns map[string]ns.NetNS
}

func newLab(t *testing.T) *lab {
	t.Helper()
	r, err := run.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return &lab{t: t, r: r, ns: map[string]ns.NetNS{}}
}

// netns creates (once) the namespace for a short name.
func (l *lab) netns(name string) ns.NetNS {
	l.t.Helper()
	if n, ok := l.ns[name]; ok {
		return n
	}
	n := testenv.NetNSIn(l.t, l.r, name).NS
	l.ns[name] = n
	return n
}

func (l *lab) nsName(name string) string { return l.r.Name(name) }

func (l *lab) handle(name string) *netlink.Handle {
	l.t.Helper()
	h, err := nsutil.Handle(l.netns(name))
	if err != nil {
		l.t.Fatal(err)
	}
	return h
}

// bridge makes bridge br0 in namespace sw.
func (l *lab) bridge(sw string) {
	l.t.Helper()
	h := l.handle(sw)
	defer h.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := h.LinkAdd(br); err != nil {
		l.t.Fatalf("bridge in %s: %v", sw, err)
	}
	if err := h.LinkSetUp(br); err != nil {
		l.t.Fatal(err)
	}
}

// link makes a veth from namespace a (named aIf, enslaved to br0 when
// bridged) to namespace b (named bIf) and brings both ends up.
func (l *lab) link(a, aIf string, bridged bool, b, bIf string) {
	l.t.Helper()
	ha, hb := l.handle(a), l.handle(b)
	defer ha.Close()
	defer hb.Close()
	attrs := netlink.LinkAttrs{Name: aIf}
	if bridged {
		br, err := ha.LinkByName("br0")
		if err != nil {
			l.t.Fatal(err)
		}
		attrs.MasterIndex = br.Attrs().Index
	}
	v := &netlink.Veth{LinkAttrs: attrs, PeerName: bIf, PeerNamespace: netlink.NsFd(int(l.netns(b).Fd()))}
	if err := ha.LinkAdd(v); err != nil {
		l.t.Fatalf("veth %s/%s - %s/%s: %v", a, aIf, b, bIf, err)
	}
	for _, x := range []struct {
		h    *netlink.Handle
		name string
	}{{ha, aIf}, {hb, bIf}} {
		lk, err := x.h.LinkByName(x.name)
		if err != nil {
			l.t.Fatal(err)
		}
		if err := x.h.LinkSetUp(lk); err != nil {
			l.t.Fatal(err)
		}
	}
}

// addr adds an address (no DAD for IPv6, so BGP over it starts at once).
func (l *lab) addr(n, ifname, cidr string) {
	l.t.Helper()
	h := l.handle(n)
	defer h.Close()
	lk, err := h.LinkByName(ifname)
	if err != nil {
		l.t.Fatal(err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		l.t.Fatal(err)
	}
	if a.IP.To4() == nil {
		a.Flags = unix.IFA_F_NODAD
	}
	if err := h.AddrAdd(lk, a); err != nil {
		l.t.Fatalf("address %s on %s/%s: %v", cidr, n, ifname, err)
	}
}

func (l *lab) forwarding(n string) {
	l.t.Helper()
	if err := nsutil.SetSysctls(l.netns(n), map[string]string{"net/ipv4/ip_forward": "1"}); err != nil {
		l.t.Fatal(err)
	}
}

// birdRoutes lists a namespace's `proto bird` routes of one family.
func (l *lab) birdRoutes(n string, family int) map[string]netlink.Route {
	l.t.Helper()
	h := l.handle(n)
	defer h.Close()
	rs, err := nsutil.Routes(h, family, &netlink.Route{Protocol: netlink.RouteProtocol(kroute.ProtoBIRD)}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		l.t.Fatalf("routes in %s: %v", n, err)
	}
	out := map[string]netlink.Route{}
	for _, r := range rs {
		if r.Dst != nil {
			out[r.Dst.String()] = r
		}
	}
	return out
}

// ifName resolves an ifindex inside namespace n.
func (l *lab) ifName(n string, idx int) string {
	h := l.handle(n)
	defer h.Close()
	lk, err := h.LinkByIndex(idx)
	if err != nil {
		return fmt.Sprintf("if%d", idx)
	}
	return lk.Attrs().Name
}

// eventually polls cond until it returns "" or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() string) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		if last = cond(); last == "" {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not true after %v: %s", what, timeout, last)
		}
		<-tick.C
	}
}

// node is a test node: its BIRD and the blocks it owns.
type node struct {
	name  string
	v4    netip.Prefix
	bird  *bird.Instance
	ren   confd.Rendered
	block string
}

// startAll starts every instance concurrently and waits until each has
// all its BGP sessions Established; it returns the time from the start
// call and logs how much of it was starting the containers.
func startAll(t *testing.T, insts []*bird.Instance, timeout time.Duration) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	if err := bird.StartAll(ctx, false, insts...); err != nil {
		t.Fatal(err)
	}
	started := time.Since(start)
	if err := bird.WaitAllEstablished(ctx, insts...); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("%d BIRD containers answering on their sockets after %v; all sessions Established after %v", len(insts), started.Round(time.Millisecond), took.Round(time.Millisecond))
	return took
}

// clusterNodes builds a cluster with n (at most 200) nodes on 10.0.0.0/24
// (and fd00::/64), each owning one v4 (and one v6) no-encap block.
func clusterNodes(n int, v6 bool) *datastore.Cluster {
	c := &datastore.Cluster{
		Pools: []datastore.IPPool{{Name: "noencap", CIDR: "10.244.0.0/16", IPIPMode: datastore.EncapNever, VXLANMode: datastore.EncapNever}},
	}
	if v6 {
		c.Pools = append(c.Pools, datastore.IPPool{Name: "noencap-v6", CIDR: "fd00:244::/48", IPIPMode: datastore.EncapNever, VXLANMode: datastore.EncapNever})
	}
	for i := 1; i <= n; i++ {
		nd := datastore.Node{Name: fmt.Sprintf("n%d", i), IPv4Address: fmt.Sprintf("10.0.0.%d/24", 10+i)}
		if v6 {
			nd.IPv6Address = fmt.Sprintf("fd00::%x/64", 0x10+i)
			c.Blocks = append(c.Blocks, datastore.BlockAffinity{CIDR: fmt.Sprintf("fd00:244:0:%x::/122", i), Node: nd.Name})
		}
		c.Nodes = append(c.Nodes, nd)
		c.Blocks = append(c.Blocks, datastore.BlockAffinity{CIDR: fmt.Sprintf("10.244.%d.0/26", i), Node: nd.Name})
	}
	return c
}

// hostOnlyInterface returns an interface of the root namespace that no
// test namespace has, to prove a container cannot see it.
func hostOnlyInterface() string {
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if i.Name != "lo" && !strings.HasPrefix(i.Name, "eth") {
			return i.Name
		}
	}
	for _, i := range ifs {
		if i.Name != "lo" {
			return i.Name
		}
	}
	return ""
}

// udpEcho sends one datagram from src (in namespace a) to dst (in b) and
// waits for the echo: traffic only between addresses of test namespaces.
func (l *lab) udpEcho(a, src, b, dst string) error {
	var srv, cli *net.UDPConn
	if err := l.netns(b).Do(func(ns.NetNS) error {
		var err error
		srv, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(dst)})
		return err
	}); err != nil {
		return fmt.Errorf("listen in %s: %w", b, err)
	}
	defer srv.Close()
	if err := l.netns(a).Do(func(ns.NetNS) error {
		var err error
		cli, err = net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)}, srv.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		return fmt.Errorf("dial from %s: %w", a, err)
	}
	defer cli.Close()
	go func() {
		buf := make([]byte, 64)
		_ = srv.SetDeadline(time.Now().Add(3 * time.Second))
		n, from, err := srv.ReadFromUDP(buf)
		if err == nil {
			_, _ = srv.WriteToUDP(buf[:n], from)
		}
	}()
	msg := []byte("birdcage-echo")
	if _, err := cli.Write(msg); err != nil {
		return err
	}
	_ = cli.SetDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 64)
	n, err := cli.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != string(msg) {
		return fmt.Errorf("echo %q, sent %q", buf[:n], msg)
	}
	return nil
}
