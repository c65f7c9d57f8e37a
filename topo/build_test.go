package topo

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/internal/testenv"
)

func requireRoot(t testing.TB) { t.Helper(); testenv.NeedRoot(t) }

// Each built-in builds, every workload reaches every other once the test
// installs static routes, teardown leaves nothing, and the host's root
// namespace is exactly as before.
func TestBuildBuiltins(t *testing.T) {
	requireRoot(t)
	for _, name := range Builtins() {
		t.Run(name, func(t *testing.T) {
			before := snapshotRootNS(t)
			tp, err := Builtin(name)
			if err != nil {
				t.Fatal(err)
			}
			r, err := run.New()
			if err != nil {
				t.Fatal(err)
			}
			net, err := Build(context.Background(), tp, r, Options{})
			if err != nil {
				r.Close()
				testenv.SkipIfMissing(t, err, "topology "+name)
				t.Fatal(err)
			}
			assertCrossNodeUnreachable(t, net) // guard: routes are what makes it work
			installStaticRoutes(t, net)
			assertAllWorkloadsReachable(t, net)
			if err := r.Close(); err != nil {
				t.Fatalf("teardown: %v", err)
			}
			assertNothingLeft(t, r.Prefix)
			if after := snapshotRootNS(t); after != before {
				t.Errorf("root namespace changed by build+teardown:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// A run killed midway leaves namespaces behind; Clean removes them. A run
// stopped with SIGTERM or by a panic cleans up after itself, also when the
// SIGTERM comes as the build starts ("sigterm-early": on the first namespace
// of the run, the feature-detection scratch one), when the run is closing
// while the build is still making things.
func TestInterruptedBuildThenClean(t *testing.T) {
	requireRoot(t)
	for _, mode := range []string{"sigkill", "sigterm", "sigterm-early", "panic"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperInterruptedBuild$", "-test.v")
			cmd.Env = append(os.Environ(), env.Set(env.TestHelper, mode))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = cmd.Stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			var id string
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "RUN "); ok {
					id = v
					break
				}
			}
			if id == "" {
				t.Fatal("helper did not report its run")
			}
			prefix := "bc" + id + "-"
			// Kill it while the build is under way: as soon as one of the
			// build's namespaces exists. (The feature-detection scratch
			// namespace comes and goes before the build starts: killing the
			// helper on seeing it may find nothing made yet, or made after.)
			waitFor(t, 30*time.Second, func() bool {
				ours := namespacesWith(prefix)
				if mode != "sigterm-early" {
					ours = slices.DeleteFunc(ours, func(n string) bool { return n == prefix+"features" })
				}
				return len(ours) > 0
			})
			switch mode {
			case "sigkill":
				_ = cmd.Process.Kill()
			case "sigterm", "sigterm-early":
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
			go func() {
				for sc.Scan() {
				}
			}()
			_ = cmd.Wait()
			if mode == "sigkill" {
				if len(namespacesWith(prefix)) == 0 {
					t.Fatal("a SIGKILLed build left nothing: the test did not kill it midway")
				}
				rep, err := run.Clean(run.CleanOptions{RunID: id})
				if err != nil {
					t.Fatalf("clean: %v", err)
				}
				if len(rep.Namespaces) == 0 {
					t.Errorf("clean removed no namespace: %+v", rep)
				}
			}
			assertNothingLeft(t, prefix)
		})
	}
}

func TestHelperInterruptedBuild(t *testing.T) {
	cfg, err := env.LoadOS() // this helper process's edge
	if err != nil {
		t.Fatal(err)
	}
	mode := cfg.TestHelper
	if mode == "" {
		t.Skip("helper process for TestInterruptedBuildThenClean")
	}
	r, err := run.New()
	if err != nil {
		t.Fatal(err)
	}
	r.CloseOnSignal()
	defer r.Close()
	fmt.Printf("RUN %s\n", r.ID)
	if _, err := Build(context.Background(), NoEncap(30, 2), r, Options{Parallel: 2}); err != nil {
		t.Fatal(err)
	}
	if mode == "panic" {
		panic("helper: panic after build")
	}
	select {} // wait for the signal
}

func namespacesWith(prefix string) []string {
	names, _ := nsutil.List()
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

func assertNothingLeft(t *testing.T, prefix string) {
	t.Helper()
	if left := namespacesWith(prefix); len(left) > 0 {
		t.Errorf("namespaces left behind: %v", left)
	}
	id := strings.TrimSuffix(strings.TrimPrefix(prefix, "bc"), "-")
	if _, err := os.Stat(run.StateRoot + "/" + id); err == nil {
		t.Errorf("run dir %s/%s left behind", run.StateRoot, id)
	}
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("condition not met within %s", timeout)
		}
	}
}

// installStaticRoutes stands in for the route programmers: nodes route
// remote blocks via the remote node when they share a switch (else their
// default route does), routers route every block towards its node, via a
// peer router when the node is not on one of their switches.
func installStaticRoutes(t *testing.T, n *Network) {
	t.Helper()
	type hop struct{ sw, addr string }
	onSwitch := map[string][]hop{} // owner -> its switch attachments
	for _, nd := range n.Topology.Nodes {
		for _, ifc := range nd.Interfaces {
			if ifc.Switch != "" {
				onSwitch[nd.Name] = append(onSwitch[nd.Name], hop{ifc.Switch, strings.Split(ifc.Address, "/")[0]})
			}
		}
	}
	shared := func(ifs []Interface, node string) (string, bool) {
		for _, ifc := range ifs {
			for _, h := range onSwitch[node] {
				if ifc.Switch != "" && ifc.Switch == h.sw {
					return h.addr, true
				}
			}
		}
		return "", false
	}
	add := func(x *Namespace, dst netip.Prefix, gw string) {
		h, err := x.Handle()
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		rt := &netlink.Route{Dst: prefixToNet(dst), Gw: net.ParseIP(gw)}
		if err := h.RouteReplace(rt); err != nil {
			t.Fatalf("%s: route %s via %s: %v", x.Name, dst, gw, err)
		}
	}
	for _, nd := range n.Nodes {
		for _, other := range n.Nodes {
			if other == nd {
				continue
			}
			if gw, ok := shared(nd.Spec.Interfaces, other.Name); ok {
				for _, b := range other.Blocks {
					add(&nd.Namespace, b.CIDR, gw)
				}
			}
		}
	}
	for _, rt := range n.Routers {
		for _, nd := range n.Nodes {
			gw, ok := shared(rt.Spec.Interfaces, nd.Name)
			if !ok {
				for _, ifc := range rt.Spec.Interfaces {
					if ifc.Peer == "" {
						continue
					}
					peerOwner, peerIf, _ := strings.Cut(ifc.Peer, ":")
					peer, _ := n.Router(peerOwner)
					for _, pi := range peer.Spec.Interfaces {
						if pi.Name == peerIf {
							gw, ok = strings.Split(pi.Address, "/")[0], true
						}
					}
				}
			}
			if !ok {
				continue
			}
			for _, b := range nd.Blocks {
				add(&rt.Namespace, b.CIDR, gw)
			}
		}
	}
}

func prefixToNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// assertAllWorkloadsReachable sends a UDP echo between every ordered pair
// of workloads, from sockets opened inside the workloads' namespaces.
func assertAllWorkloadsReachable(t *testing.T, n *Network) {
	t.Helper()
	wls := n.Workloads()
	if len(wls) < 2 {
		t.Fatalf("topology has %d workloads; reachability needs two", len(wls))
	}
	conns := map[string]*net.UDPConn{}
	for _, wl := range wls {
		err := wl.NS.Do(func(ns.NetNS) error {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: wl.IPv4.AsSlice(), Port: 7777})
			conns[wl.Name] = c
			return err
		})
		if err != nil {
			t.Fatalf("workload %s: %v", wl.Name, err)
		}
		defer conns[wl.Name].Close()
	}
	for _, src := range wls {
		for _, dst := range wls {
			if src == dst {
				continue
			}
			if err := echo(conns[src.Name], conns[dst.Name], dst.IPv4); err != nil {
				t.Errorf("workload %s (%s) cannot reach %s (%s): %v", src.Name, src.IPv4, dst.Name, dst.IPv4, err)
			}
		}
	}
}

// assertCrossNodeUnreachable checks that, before any cluster route exists,
// the first node's workload cannot reach the last node's: otherwise the
// reachability check after installing routes would prove nothing.
func assertCrossNodeUnreachable(t *testing.T, n *Network) {
	t.Helper()
	src, dst := n.Nodes[0].Workloads[0], n.Nodes[len(n.Nodes)-1].Workloads[0]
	var sc, dc *net.UDPConn
	for _, x := range []struct {
		wl *Workload
		c  **net.UDPConn
	}{{src, &sc}, {dst, &dc}} {
		err := x.wl.NS.Do(func(ns.NetNS) error {
			var err error
			*x.c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: x.wl.IPv4.AsSlice(), Port: 7777})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		defer (*x.c).Close()
	}
	if err := echo(sc, dc, dst.IPv4); err == nil {
		t.Fatalf("%s reached %s before any route to %s's block existed", src.Name, dst.Name, dst.Node)
	}
}

// echo sends from src to dst and waits for dst to receive it, retrying while
// neighbours resolve.
func echo(src, dst *net.UDPConn, to netip.Addr) error {
	msg := []byte(fmt.Sprintf("hello %s", to))
	buf := make([]byte, 64)
	var last error
	for range 30 {
		if _, err := src.WriteToUDP(msg, &net.UDPAddr{IP: to.AsSlice(), Port: 7777}); err != nil {
			last = err
		}
		_ = dst.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		k, _, err := dst.ReadFromUDP(buf)
		if err == nil && string(buf[:k]) == string(msg) {
			return nil
		}
		if err != nil {
			last = err
		}
	}
	return last
}

// snapshotRootNS renders the root namespace's links, addresses, routes,
// rules and the sysctls a build could touch. The kernel's fallback tunnel
// devices are left out: loading the ipip module creates them.
func snapshotRootNS(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	// The root namespace is the machine's: anything else running can
	// interrupt a dump, so every list goes through nsutil.Dump.
	links, err := nsutil.Dump("list links", netlink.LinkList)
	if err != nil {
		t.Fatal(err)
	}
	fallback := map[string]bool{"tunl0": true, "sit0": true, "ip6tnl0": true, "gre0": true, "gretap0": true, "erspan0": true, "ip_vti0": true, "ip6_vti0": true, "ip6gre0": true}
	for _, l := range links {
		a := l.Attrs()
		if fallback[a.Name] {
			continue
		}
		fmt.Fprintf(&b, "link %s %s mtu=%d flags=%v mac=%s master=%d\n", a.Name, l.Type(), a.MTU, a.Flags, a.HardwareAddr, a.MasterIndex)
		addrs, err := nsutil.Dump("list addresses", func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_ALL) })
		if err != nil {
			t.Fatal(err)
		}
		for _, ad := range addrs {
			fmt.Fprintf(&b, "  addr %s\n", ad.IPNet)
		}
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := nsutil.Dump("list routes", func() ([]netlink.Route, error) {
			return netlink.RouteListFiltered(fam, &netlink.Route{Table: 0}, netlink.RT_FILTER_TABLE)
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			fmt.Fprintf(&b, "route %s\n", r.String())
		}
		rules, err := nsutil.Dump("list rules", func() ([]netlink.Rule, error) { return netlink.RuleList(fam) })
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			fmt.Fprintf(&b, "rule %s\n", r.String())
		}
	}
	for _, k := range []string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/ipv4/conf/all/rp_filter", "net/ipv4/conf/default/rp_filter"} {
		v, _ := os.ReadFile("/proc/sys/" + k)
		fmt.Fprintf(&b, "sysctl %s=%s", k, v)
	}
	return b.String()
}
