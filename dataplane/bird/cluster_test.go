// These root tests hold the BIRD half of birdcage to what the platform notes
// measured: BIRD in a runc container per node, joined to the node's network
// namespace, programs no-encap cluster routes at the configured metric when
// BGPConfiguration gives it no-encap; SIGKILL leaves peers holding the
// routes as stale, SIGTERM makes them withdraw, a restart with -R keeps the
// routes, and `configure` with a kernel filter that now rejects a prefix
// removes the kernel route. The container cannot see the host's interfaces
// and stopping it leaves nothing running.
package bird_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/vishvananda/netlink"
)

// buildMesh wires the cluster's nodes to one bridge and prepares (but does
// not start) a BIRD per node with its rendered config.
func buildMesh(t *testing.T, l *lab, c *datastore.Cluster, rel config.Release) []*node {
	t.Helper()
	l.bridge("sw")
	var nodes []*node
	for i, nd := range c.Nodes {
		l.link("sw", fmt.Sprintf("v%d", i+1), true, nd.Name, "eth0")
		l.addr(nd.Name, "eth0", nd.IPv4Address)
		if nd.IPv6Address != "" {
			l.addr(nd.Name, "eth0", nd.IPv6Address)
		}
	}
	for _, nd := range c.Nodes {
		ren, err := confd.Render(c, nd.Name, rel, confd.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := bird.New(l.r, bird.Options{Name: nd.Name, NetNS: l.nsName(nd.Name)})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.WriteConfig(ren.Config); err != nil {
			t.Fatal(err)
		}
		n := &node{name: nd.Name, bird: b, ren: ren}
		for _, blk := range c.Blocks {
			if blk.Node == nd.Name && !strings.Contains(blk.CIDR, ":") {
				n.block = blk.CIDR
			}
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// remoteRoutesMissing says which remote v4 blocks node n has no correct
// `proto bird` route to (metric, gateway), "" when all are there.
func remoteRoutesMissing(l *lab, c *datastore.Cluster, n string, metric int) string {
	got := l.birdRoutes(n, netlink.FAMILY_V4)
	var miss []string
	for _, blk := range c.Blocks {
		if blk.Node == n || strings.Contains(blk.CIDR, ":") {
			continue
		}
		owner, _ := c.Node(blk.Node)
		gw := strings.Split(owner.IPv4Address, "/")[0]
		r, ok := got[blk.CIDR]
		switch {
		case !ok:
			miss = append(miss, blk.CIDR+": no proto bird route")
		case r.Priority != metric:
			miss = append(miss, fmt.Sprintf("%s: metric %d, want %d", blk.CIDR, r.Priority, metric))
		case r.Gw == nil || r.Gw.String() != gw:
			miss = append(miss, fmt.Sprintf("%s: via %v, want via %s", blk.CIDR, r.Gw, gw))
		}
	}
	return strings.Join(miss, "; ")
}

func hasBirdRoute(l *lab, n, prefix string) bool {
	_, ok := l.birdRoutes(n, netlink.FAMILY_V4)[prefix]
	return ok
}

// consistently fails if cond returns non-"" at any poll during d.
func consistently(t *testing.T, d time.Duration, what string, cond func() string) {
	t.Helper()
	end := time.Now().Add(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(end) {
		if s := cond(); s != "" {
			t.Fatalf("%s: broke after %v: %s", what, d-time.Until(end), s)
		}
		<-tick.C
	}
}

func TestNoEncapClusterConverges(t *testing.T) {
	requireRoot(t)
	l := newLab(t)
	c := clusterNodes(3, true)
	// 1. BGPConfiguration unset in 3.33: BIRD owns no-encap, its BGP
	// routes at metric 1024 (3.33's calico_kernel_programming sets
	// krt_metric 1024 for BGP routes: bgp_processor.go @ 6609dea54713).
	nodes := buildMesh(t, l, c, config.R333)
	if nodes[0].ren.Policy.KernelMetric != 1024 {
		t.Fatalf("guard: 3.33 renders BGP routes at metric 1024, policy is %+v", nodes[0].ren.Policy)
	}
	if !nodes[0].ren.Policy.Effective.ProgramNoEncapClusterRoutes() {
		t.Fatalf("guard: BIRD must own no-encap routes here, policy is %+v", nodes[0].ren.Policy)
	}
	var insts []*bird.Instance
	for _, n := range nodes {
		insts = append(insts, n.bird)
		// A workload-like address from the node's own block, for pings.
		l.addr(n.name, "lo", strings.Replace(n.block, ".0/26", ".1/32", 1))
	}

	// 2. Start all; every session Established.
	took := startAll(t, insts, 60*time.Second)
	t.Logf("FIGURE: 3-node no-encap mesh (v4+v6 sessions): all sessions Established %v after the first start", took.Round(time.Millisecond))

	// 3. Every node has a proto bird route to every remote block at metric
	// 1024 (BIRD 2's kernel protocol at metric 0 writes each route's
	// krt_metric).
	for _, n := range nodes {
		eventually(t, 10*time.Second, n.name+" routes to remote blocks", func() string { return remoteRoutesMissing(l, c, n.name, n.ren.Policy.KernelMetric) })
		v6 := l.birdRoutes(n.name, netlink.FAMILY_V6)
		for _, blk := range c.Blocks {
			if blk.Node != n.name && strings.Contains(blk.CIDR, ":") {
				if _, ok := v6[blk.CIDR]; !ok {
					eventually(t, 5*time.Second, n.name+" v6 route "+blk.CIDR, func() string {
						if _, ok := l.birdRoutes(n.name, netlink.FAMILY_V6)[blk.CIDR]; !ok {
							return "missing"
						}
						return ""
					})
				}
			}
		}
	}

	for _, r := range l.birdRoutes(nodes[0].name, netlink.FAMILY_V6) {
		// 3.33 asks for 1024 on IPv6 too; the kernel would store an IPv6
		// route asked for at 0 at 1024 anyway, for BIRD and the programmer
		// alike.
		t.Logf("FACT: BIRD's IPv6 route %s on %s is stored with priority %d", r.Dst, nodes[0].name, r.Priority)
		break
	}

	// 4. Traffic between own-block addresses cross the BIRD-programmed routes.
	for _, a := range nodes {
		for _, b := range nodes {
			if a == b {
				continue
			}
			src := strings.Replace(a.block, ".0/26", ".1", 1)
			dst := strings.Replace(b.block, ".0/26", ".1", 1)
			if err := l.udpEcho(a.name, src, b.name, dst); err != nil {
				t.Errorf("UDP echo %s -> %s (%s -> %s): %v", a.name, b.name, src, dst, err)
			}
		}
	}

	for _, n := range nodes {
		rss, err := n.bird.RSS()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("FIGURE: RSS of bird on %s: %.1f MiB", n.name, float64(rss)/(1<<20))
	}

	t.Run("passive peering: the greater address connects", func(t *testing.T) { checkPassiveDirection(t, l, c) })
	t.Run("isolation", func(t *testing.T) { checkIsolation(t, l, nodes[0]) })
	t.Run("sigkill keeps stale routes on peers, -R restart keeps them", func(t *testing.T) { checkKillAndRecover(t, l, c, nodes) })
	t.Run("sigterm makes peers withdraw, stop leaves nothing", func(t *testing.T) { checkTerm(t, l, c, nodes) })
	t.Run("configure", func(t *testing.T) { checkConfigure(t, l, c, nodes) })
}

// checkIsolation: BIRD runs in the node's netns, not the host's, and sees
// only the node's interfaces.
func checkIsolation(t *testing.T, l *lab, n *node) {
	pid := n.bird.Pid()
	var birdNS, nodeNS, hostNS syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &birdNS); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(nsutil.Path(l.nsName(n.name)), &nodeNS); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat("/proc/self/ns/net", &hostNS); err != nil {
		t.Fatal(err)
	}
	if birdNS.Ino != nodeNS.Ino || birdNS.Ino == hostNS.Ino {
		t.Fatalf("bird pid %d netns inode %d; node netns %d, host %d: want bird in the node's netns", pid, birdNS.Ino, nodeNS.Ino, hostNS.Ino)
	}
	for _, kind := range []string{"pid", "mnt", "uts", "ipc"} {
		var a, b syscall.Stat_t
		_ = syscall.Stat(fmt.Sprintf("/proc/%d/ns/%s", pid, kind), &a)
		_ = syscall.Stat("/proc/self/ns/"+kind, &b)
		if a.Ino == b.Ino {
			t.Errorf("bird shares the host's %s namespace", kind)
		}
	}
	out, err := n.bird.Container().Exec(context.Background(), "ip", "-o", "link")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 {
			names = append(names, strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
		}
	}
	if strings.Join(names, ",") != "lo,eth0" {
		t.Errorf("inside the container `ip link` shows %v, want exactly lo, eth0", names)
	}
	if h := hostOnlyInterface(); h != "" {
		for _, x := range names {
			if x == h {
				t.Errorf("container sees host interface %s", h)
			}
		}
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			// NET_BIND_SERVICE(10), NET_ADMIN(12), NET_RAW(13).
			if strings.TrimSpace(v) != "0000000000003400" {
				t.Errorf("bird effective capabilities %s, want 0000000000003400 (NET_ADMIN, NET_BIND_SERVICE, NET_RAW)", strings.TrimSpace(v))
			}
		}
		if v, ok := strings.CutPrefix(l, "NoNewPrivs:"); ok && strings.TrimSpace(v) != "1" {
			t.Errorf("bird NoNewPrivs %s, want 1", strings.TrimSpace(v))
		}
	}
}

// protoTo returns from's v4 BGP protocol name for the session to node to.
func protoTo(c *datastore.Cluster, from *node, to string) string {
	nd, _ := c.Node(to)
	addr := strings.Split(nd.IPv4Address, "/")[0]
	for _, p := range from.ren.Peers {
		if p.Address.String() == addr {
			return p.Protocol
		}
	}
	return ""
}

func checkKillAndRecover(t *testing.T, l *lab, c *datastore.Cluster, nodes []*node) {
	n1, n3 := nodes[0], nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Guard: the route exists before the event.
	if !hasBirdRoute(l, n1.name, n3.block) {
		t.Fatalf("guard: %s has no route to %s before the kill", n1.name, n3.block)
	}
	pid := n3.bird.Pid()
	if err := n3.bird.Stop(ctx, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Errorf("bird pid %d still exists after Stop(SIGKILL)", pid)
	}
	proto := protoTo(c, n1, n3.name)
	var seen bird.Protocol
	eventually(t, 10*time.Second, n1.name+" notices "+n3.name+" is gone", func() string {
		ps, err := n1.bird.Client().Protocols(ctx)
		if err != nil {
			return err.Error()
		}
		for _, p := range ps {
			if p.Name == proto && !p.Established() {
				seen = p
				return ""
			}
		}
		return proto + " still Established"
	})
	t.Logf("%s after SIGKILL of %s: %s %s; details %v", proto, n3.name, seen.State, seen.Info, seen.Details)
	// No Cease arrived, so n1 runs the peer's graceful-restart timer and
	// holds n3's routes as stale.
	if seen.Details["Restart timer"] == "" {
		t.Errorf("%s shows no graceful-restart (Restart timer) after SIGKILL of %s: %v", proto, n3.name, seen.Details)
	}
	// Stale, not withdrawn: the route stays in n1's kernel across scans.
	consistently(t, 3*time.Second, n1.name+" keeps the stale route to "+n3.block, func() string {
		if !hasBirdRoute(l, n1.name, n3.block) {
			return "route withdrawn"
		}
		return ""
	})
	// persist: the killed node keeps its own routes too.
	if m := remoteRoutesMissing(l, c, n3.name, n3.ren.Policy.KernelMetric); m != "" {
		t.Errorf("%s lost kernel routes while BIRD was down (persist): %s", n3.name, m)
	}

	// n1 says it is helping n3 through a restart (WaitRestartsDone reads it).
	if !seen.NeighborRestarting {
		t.Errorf("%s does not show its neighbor %s restarting after the SIGKILL: %+v", proto, n3.name, seen)
	}

	// Restart with -R: sessions come back, routes never leave.
	start := time.Now()
	if err := n3.bird.StartRecovery(ctx); err != nil {
		t.Fatal(err)
	}
	// Its first answer comes before any peer's End-of-RIB: in recovery.
	if rec, err := n3.bird.Client().InRecovery(ctx); err != nil || !rec {
		t.Errorf("%s just started with -R: show status in recovery=%v (%v), want true", n3.name, rec, err)
	}
	if err := n3.bird.WaitEstablished(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE: %s restarted with -R: Established after %v", n3.name, time.Since(start).Round(time.Millisecond))
	if err := n1.bird.WaitEstablished(ctx, proto); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{n3, n1} {
		if err := n.bird.WaitRestartsDone(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("FIGURE: %s restarted with -R: no graceful restart in progress on it or %s %v after the start", n3.name, n1.name, time.Since(start).Round(time.Millisecond))
	if rec, err := n3.bird.Client().InRecovery(ctx); err != nil || rec {
		t.Errorf("after WaitRestartsDone %s is in recovery=%v (%v)", n3.name, rec, err)
	}
	if ps, err := n1.bird.Client().Protocols(ctx); err != nil {
		t.Fatal(err)
	} else {
		for _, p := range ps {
			if p.Name == proto && p.NeighborRestarting {
				t.Errorf("after WaitRestartsDone %s still shows %s restarting", n1.name, proto)
			}
		}
	}
	eventually(t, 10*time.Second, n3.name+" routes after -R", func() string { return remoteRoutesMissing(l, c, n3.name, n3.ren.Policy.KernelMetric) })
	if !hasBirdRoute(l, n1.name, n3.block) {
		t.Errorf("%s has no route to %s after %s recovered", n1.name, n3.block, n3.name)
	}
}

func checkTerm(t *testing.T, l *lab, c *datastore.Cluster, nodes []*node) {
	n1, n2 := nodes[0], nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if !hasBirdRoute(l, n1.name, n2.block) {
		t.Fatalf("guard: %s has no route to %s before SIGTERM", n1.name, n2.block)
	}
	pid, id := n2.bird.Pid(), n2.bird.ContainerID()
	start := time.Now()
	if err := n2.bird.Stop(ctx, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 5*time.Second, n1.name+" withdraws "+n2.block+" after SIGTERM", func() string {
		if hasBirdRoute(l, n1.name, n2.block) {
			return "still there"
		}
		return ""
	})
	t.Logf("FIGURE: SIGTERM of %s: %s gone from %s's kernel %v after the signal (%v after exit)", n2.name, n2.block, n1.name, time.Since(start).Round(time.Millisecond), took.Round(time.Millisecond))
	// Stopping leaves nothing: no process, no runc state.
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Errorf("bird pid %d still exists after Stop", pid)
	}
	if out, err := exec.Command("runc", "--root", l.r.Path("runc"), "state", id).CombinedOutput(); err == nil {
		t.Errorf("runc still knows container %s after Stop: %s", id, out)
	}
	if m := remoteRoutesMissing(l, c, n2.name, n2.ren.Policy.KernelMetric); m != "" {
		t.Errorf("%s lost its kernel routes on SIGTERM (persist): %s", n2.name, m)
	}
	// Plain restart: routes come back on the peers.
	if err := n2.bird.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n2.bird.WaitEstablished(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, n1.name+" relearns "+n2.block, func() string { return remoteRoutesMissing(l, c, n1.name, n1.ren.Policy.KernelMetric) })
}

func checkConfigure(t *testing.T, l *lab, c *datastore.Cluster, nodes []*node) {
	n1 := nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if m := remoteRoutesMissing(l, c, n1.name, n1.ren.Policy.KernelMetric); m != "" {
		t.Fatalf("guard: %s routes before configure: %s", n1.name, m)
	}
	// 1. A syntax error is refused and changes nothing.
	before, _ := os.ReadFile(n1.bird.ConfigPath())
	err := n1.bird.Configure(ctx, []byte("protocol bgp {{ nonsense\n"))
	if !errors.Is(err, bird.ErrInvalidConfig) {
		t.Fatalf("configure with a syntax error: err %v, want ErrInvalidConfig", err)
	}
	t.Logf("syntax error reported as: %v", err)
	after, _ := os.ReadFile(n1.bird.ConfigPath())
	if string(before) != string(after) || !n1.bird.Running() {
		t.Fatalf("a rejected config changed the file or stopped bird")
	}
	if err := n1.bird.WaitEstablished(ctx); err != nil {
		t.Fatal(err)
	}

	// 2. BIRD stops owning no-encap: the kernel filter now rejects the pool
	// and BIRD removes its kernel routes.
	off := *c
	off.BGP.ProgramClusterRoutes = string(config.Disabled)
	ren, err := confd.Render(&off, n1.name, config.R333, confd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := n1.bird.Configure(ctx, ren.Config); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 5*time.Second, n1.name+" removes its no-encap kernel routes", func() string {
		for _, n := range nodes[1:] {
			if hasBirdRoute(l, n1.name, n.block) {
				return n.block + " still programmed"
			}
		}
		return ""
	})
	t.Logf("FIGURE: configure with the pool rejected: kernel routes gone %v after configure (%v after the reply)", time.Since(start).Round(time.Millisecond), took.Round(time.Millisecond))
	// BGP itself is untouched: the sessions stay up, BIRD still has the routes.
	if err := n1.bird.WaitEstablished(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := n1.bird.Client().Routes(ctx, "for "+nodes[1].block)
	if err != nil || len(rs) == 0 {
		t.Fatalf("BIRD's table lost %s after the kernel filter change: %v %v", nodes[1].block, rs, err)
	}
	// 3. Back: the routes return.
	if err := n1.bird.Configure(ctx, n1.ren.Config); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, n1.name+" reprograms the routes", func() string { return remoteRoutesMissing(l, c, n1.name, n1.ren.Policy.KernelMetric) })
}

// checkPassiveDirection: every mesh session's TCP connection was opened by
// the node whose address is the greater string (its peer renders `passive
// on`: bird.cfg.template @ 3cdeae8f7ace, processMeshPeers @ de60d98e97a7,
// 6609dea54713), so port 179 is the lesser node's end, on both families.
func checkPassiveDirection(t *testing.T, l *lab, c *datastore.Cluster) {
	var pairs int
	for _, nd := range c.Nodes {
		out, err := exec.Command("ip", "netns", "exec", l.nsName(nd.Name), "ss", "-Htn", "state", "established", "( sport = :179 or dport = :179 )").CombinedOutput()
		if err != nil {
			t.Fatalf("ss in %s: %v: %s", nd.Name, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			if len(f) < 4 {
				continue
			}
			local, err1 := netip.ParseAddrPort(f[2])
			peer, err2 := netip.ParseAddrPort(f[3])
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: ss line %q: %v %v", nd.Name, line, err1, err2)
			}
			la, pa := local.Addr().Unmap().String(), peer.Addr().Unmap().String()
			accepted := local.Port() == 179
			// The lesser string accepts (it is passive toward the greater).
			if want := la < pa; accepted != want {
				t.Errorf("%s: session %s <-> %s: accepted here=%v, want %v (the greater string %s connects)", nd.Name, la, pa, accepted, want, max(la, pa))
			}
			pairs++
		}
	}
	// 3 nodes, 2 families: 6 sessions, each seen from both ends.
	if pairs != 12 {
		t.Errorf("saw %d session ends, want 12 (3 nodes x 2 peers x 2 families)", pairs)
	}
	t.Logf("FACT: all %d mesh session ends connected from the greater-string address", pairs)
}
