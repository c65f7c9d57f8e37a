package etcdv3

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/topo"
)

// CalicoEnv names a directory laid out like the calico/node image's root
// filesystem (usr/bin/calico at 3.33, bin/calico-node before).
const CalicoEnv = "BIRDCAGE_CALICO"

// featureCalico is the feature a test without a Calico build skips for.
const featureCalico = "calico"

// felixProtocol is the kernel route protocol of Felix's cluster routes
// (RTPROT 80, felix/routetable; seen on real Felix 3.33 in the smoke run of
// issue 45).
const felixProtocol = 80

// TestRealFelixProgramsARemoteBlock holds the datastore against real Felix:
// Felix in a node's namespace, reading only the etcd this package writes,
// programs the route to another node's block, and takes it away when the
// cluster model's FelixConfiguration says Disabled — a live change that
// reaches Felix only through etcd.
func TestRealFelixProgramsARemoteBlock(t *testing.T) {
	felixCmd := calicoFelix(t)
	r := testenv.NewRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// 1. A control-plane namespace (etcd, 10.250.0.1) and node-1's
	// (10.250.0.2, Felix) on one link; node-2 (10.250.0.3) exists only in
	// the datastore: its block's route is the one Felix must write.
	cp, node := cpAndNode(t, r, "felix")

	// 2. The cluster model: a no-encap pool, node-2's block, Felix told to
	// program no-encap cluster routes.
	store, err := openStore(r)
	if err != nil {
		t.Fatal(err)
	}
	remote := twoNodeNoEncap(t, store)
	// A workload of node-1's: its host-side veth cali1 (the far end stays
	// in node-1's namespace; only the host side matters to Felix).
	node.Veth(t, "cali1", "wl1-eth0")
	workload := netip.MustParsePrefix("10.65.0.2/32")
	must(t, store.Put(datastore.KindWorkload, "wl-1", datastore.Workload{Name: "wl-1", Node: "node-1", Interface: "cali1", Addresses: []string{workload.String()}}))
	must(t, store.Put(datastore.KindFelixConfiguration, datastore.SingletonName, datastore.FelixConfiguration{ProgramClusterRoutes: string(config.Enabled)}))
	must(t, store.Put(datastore.KindBGPConfiguration, datastore.SingletonName, datastore.BGPConfiguration{ProgramClusterRoutes: string(config.Disabled)}))

	srv, err := Serve(ctx, r, store, ServerOptions{NetNS: cp.NS.Path(), Listen: netip.MustParseAddrPort("10.250.0.1:2379")},
		Options{Release: calicoRelease(t, felixCmd)}, func(_ SyncReport, err error) {
			if err != nil {
				t.Errorf("sync: %v", err)
			}
		})
	if err != nil {
		t.Fatal(err)
	}

	// Guard: no route to the remote block before Felix runs.
	if rt := remoteRoute(t, node.Handle, remote); rt != nil {
		t.Fatalf("node-1 has a route to %s before Felix started: %v", remote, rt)
	}

	// 3. Felix in node-1's namespace, restarted whenever it exits as runit
	// does, its files in a mount namespace of its own so it writes nothing
	// on the host.
	logPath := filepath.Join(srv.Dir, "felix.log")
	felix := superviseFelix(t, node.NS, felixCmd, srv, logPath)
	r.Defer("felix", felix.Stop)
	felixLog := func() string { b, _ := os.ReadFile(logPath); return tail(string(b), 40) }

	// 4. Felix programs the remote block via node-2, proto 80.
	started := time.Now()
	rt := waitRoute(t, node.Handle, remote, true, 90*time.Second, felixLog)
	t.Logf("route to %s %v after Felix started", remote, time.Since(started).Round(time.Millisecond))
	if rt.Protocol != felixProtocol || rt.Gw.String() != "10.250.0.3" {
		t.Errorf("route to %s: proto %d via %s; want proto %d via 10.250.0.3", remote, rt.Protocol, rt.Gw, felixProtocol)
	}
	t.Logf("Felix's route: %s proto %d", rt, rt.Protocol)

	// 4b. The WorkloadEndpoint: Felix routes the workload's address to its
	// veth, and the endpoint's profile (kns.default) becomes a chain.
	cali1, err := node.Handle.LinkByName("cali1")
	if err != nil {
		t.Fatal(err)
	}
	wrt := waitRoute(t, node.Handle, workload, true, 30*time.Second, felixLog)
	if wrt.LinkIndex != cali1.Attrs().Index {
		t.Errorf("route to workload %s: dev index %d; want cali1 (%d)", workload, wrt.LinkIndex, cali1.Attrs().Index)
	}
	var rules string
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	if err := poll.Until(pctx, 250*time.Millisecond, func() bool {
		rules = rulesIn(node.NS)
		return strings.Contains(rules, "kns.default")
	}); err != nil {
		t.Errorf("within 30s no rule in node-1's namespace names the workload's profile kns.default: Felix did not apply the endpoint's profile; rules end:\n%s", tail(rules, 40))
	}

	// 5. The live change: programClusterRoutes Disabled in the model; Felix
	// takes its route away.
	must(t, store.Put(datastore.KindFelixConfiguration, datastore.SingletonName, datastore.FelixConfiguration{ProgramClusterRoutes: string(config.Disabled)}))
	changed := time.Now()
	startsBefore := felix.Starts()
	waitRoute(t, node.Handle, remote, false, 90*time.Second, felixLog)
	t.Logf("route gone %v after the model changed", time.Since(changed).Round(time.Millisecond))
	// Felix 3.33 takes this change by exiting and being started again
	// (daemon.go: "change DOES require Felix to restart"); the route went
	// with the new Felix, not the old one.
	t.Logf("Felix started %d time(s) in all, %d since the change", felix.Starts(), felix.Starts()-startsBefore)
}

// cpAndNode makes a control-plane namespace (10.250.0.1 on cp0) and
// node-1's (10.250.0.2 on eth0), joined by a veth.
func cpAndNode(t *testing.T, r *run.Run, tag string) (cp, node *testenv.NetNS) {
	t.Helper()
	cp = testenv.NetNSIn(t, r, tag+"cp")
	node = testenv.NetNSIn(t, r, tag+"node")
	cp.Veth(t, "cp0", "eth0", "10.250.0.1/24")
	peer, err := cp.Handle.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	must(t, cp.Handle.LinkSetNsFd(peer, int(node.NS.Fd())))
	eth0, err := node.Handle.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := netlink.ParseAddr("10.250.0.2/24")
	must(t, node.Handle.AddrAdd(eth0, a))
	must(t, node.Handle.LinkSetUp(eth0))
	if lo, err := node.Handle.LinkByName("lo"); err == nil {
		must(t, node.Handle.LinkSetUp(lo))
	}
	return cp, node
}

// twoNodeNoEncap puts a no-encap pool, node-1 (10.250.0.2) and node-2
// (10.250.0.3) with a block each; it returns node-2's block.
func twoNodeNoEncap(t *testing.T, store *datastore.DirStore) netip.Prefix {
	t.Helper()
	remote := netip.MustParsePrefix("10.65.0.64/26")
	must(t, store.Put(datastore.KindIPPool, "noencap", datastore.IPPool{Name: "noencap", CIDR: "10.65.0.0/16", IPIPMode: datastore.EncapNever}))
	must(t, store.Put(datastore.KindNode, "node-1", datastore.Node{Name: "node-1", IPv4Address: "10.250.0.2/24"}))
	must(t, store.Put(datastore.KindNode, "node-2", datastore.Node{Name: "node-2", IPv4Address: "10.250.0.3/24"}))
	must(t, store.Put(datastore.KindBlockAffinity, "b-local", datastore.BlockAffinity{CIDR: "10.65.0.0/26", Node: "node-1"}))
	must(t, store.Put(datastore.KindBlockAffinity, "b-remote", datastore.BlockAffinity{CIDR: remote.String(), Node: "node-2"}))
	return remote
}

// calicoFelix returns the command that runs Felix from $BIRDCAGE_CALICO, or
// skips naming the feature.
func calicoFelix(t *testing.T) []string {
	dir := os.Getenv(CalicoEnv)
	if dir == "" {
		testenv.Missing(t, featureCalico, "set "+CalicoEnv+"=DIR, a directory laid out like the calico/node image's root filesystem")
	}
	if p := filepath.Join(dir, "usr/bin/calico"); isExecutable(p) { // 3.33
		return []string{p, "component", "felix"}
	}
	if p := filepath.Join(dir, "bin/calico-node"); isExecutable(p) { // 3.31, 3.32
		return []string{p, "-felix"}
	}
	t.Fatalf("%s=%s: neither usr/bin/calico (3.33) nor bin/calico-node (3.31, 3.32) is an executable there", CalicoEnv, dir)
	return nil
}

// rulesIn is every iptables (nft-backed and legacy) and nftables rule of
// netns, as text.
func rulesIn(netns ns.NetNS) string {
	var rules strings.Builder
	_ = netns.Do(func(ns.NetNS) error {
		for _, c := range [][]string{{"iptables-save"}, {"iptables-legacy-save"}, {"nft", "list", "ruleset"}} {
			out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
			fmt.Fprintf(&rules, "### %s: %v\n%s", c[0], err, out)
		}
		return nil
	})
	return rules.String()
}

// calicoRelease is the release of the build at $BIRDCAGE_CALICO, as its
// binary reports it (`calico version` at 3.33, `calico-node -v` before:
// buildinfo.PrintVersion), so the writer writes that release's API.
func calicoRelease(t *testing.T, felix []string) config.Release {
	t.Helper()
	args := []string{"version"}
	if !strings.HasSuffix(felix[0], "/calico") {
		args = []string{"-v"}
	}
	out, err := exec.Command(felix[0], args...).CombinedOutput()
	m := regexp.MustCompile(`v(3\.\d+)\.`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("%s %s: %v; no version vX.Y. in its output:\n%s", felix[0], strings.Join(args, " "), err, out)
	}
	r, err := config.ParseRelease(string(m[1]))
	if err != nil {
		t.Fatalf("%s reports %s: %v", felix[0], m[1], err)
	}
	return r
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// felixService runs Felix as calico-node's runit service does
// (node/filesystem/etc/service/available/felix/run): started again
// whenever it exits, as it does by design when a configuration field that
// needs a restart changes ("Exiting for config change", rc 129).
type felixService struct {
	mu       sync.Mutex
	cmd      *exec.Cmd
	starts   int
	stopping bool
	done     chan struct{}
}

// superviseFelix runs Felix in netns with the environment the felix
// service gives it, in a private mount namespace whose /run and /var/lib
// are overlays on temp dirs, so Felix's files (/var/run/calico,
// /var/lib/calico/mtu) and iptables' lock never reach the host's.
func superviseFelix(t *testing.T, netns ns.NetNS, felix []string, srv *Server, logPath string) *felixService {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	script := `set -e
for d in /run /var/lib; do
	u="$OVL/$(echo $d | tr / _)"; mkdir -p "$u/upper" "$u/work"
	mount -t overlay overlay -o "lowerdir=$d,upperdir=$u/upper,workdir=$u/work" "$d"
done
mkdir -p /var/run/calico/endpoint-status /var/lib/calico
exec "$@"`
	env := append(os.Environ(), srv.Env()...)
	env = append(env,
		"OVL="+tmp,
		"FELIX_FELIXHOSTNAME=node-1",
		"FELIX_LOGSEVERITYSCREEN=Info",
		"FELIX_LOGFILEPATH=none",
		"FELIX_LOGSEVERITYSYS=none",
		"FELIX_HEALTHENABLED=false",
		"FELIX_IPV6SUPPORT=false",
		"FELIX_USAGEREPORTINGENABLED=false",
		"FELIX_DebugSkipCTLBCleanup=true", // a Felix built without cgo panics in the libbpf stub otherwise (issue 45)
	)
	s := &felixService{done: make(chan struct{})}
	start := func() (*exec.Cmd, error) {
		cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "felix"}, felix...)...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err := netns.Do(func(ns.NetNS) error { return cmd.Start() })
		return cmd, err
	}
	cmd, err := start()
	if err != nil {
		t.Fatalf("start felix (%s): %v", strings.Join(felix, " "), err)
	}
	s.cmd, s.starts = cmd, 1
	go func() {
		defer close(s.done)
		defer logf.Close()
		for {
			_ = s.current().Wait()
			s.mu.Lock()
			if s.stopping {
				s.mu.Unlock()
				return
			}
			cmd, err := start()
			if err != nil {
				s.mu.Unlock()
				fmt.Fprintf(logf, "birdcage test: restart felix: %v\n", err)
				return
			}
			s.cmd = cmd
			s.starts++
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *felixService) current() *exec.Cmd {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd
}

// Starts is how many times Felix has been started.
func (s *felixService) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

// Stop ends the service: SIGTERM to Felix's process group, SIGKILL after 10s.
func (s *felixService) Stop() error {
	s.mu.Lock()
	s.stopping = true
	pid := s.cmd.Process.Pid
	s.mu.Unlock()
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-s.done
	}
	return nil
}

func remoteRoute(t *testing.T, h *netlink.Handle, dst netip.Prefix) *netlink.Route {
	t.Helper()
	rs, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 254}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Dst != nil && r.Dst.String() == dst.String() {
			return &r
		}
	}
	return nil
}

// waitRoute polls the node's main table until a route to dst is there
// (present) or gone, for at most limit.
func waitRoute(t *testing.T, h *netlink.Handle, dst netip.Prefix, present bool, limit time.Duration, log func() string) *netlink.Route {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var rt *netlink.Route
	if err := poll.Until(ctx, 200*time.Millisecond, func() bool {
		rt = remoteRoute(t, h, dst)
		return (rt != nil) == present
	}); err != nil {
		t.Fatalf("route to %s present=%v not reached within %s (last seen: %v); Felix's log ends:\n%s", dst, present, limit, rt, log())
	}
	return rt
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestRealFelixTakesTheTunnelAddressFromTheDatastore holds the IPIP half of
// the mapping against real Felix at 3.33 defaults (FelixConfiguration
// unset: Felix programs IPIP cluster routes): Felix gives tunl0 the tunnel
// address this package put in node-1's Node resource (and in IPAM under
// node-1's tunnel handle), and routes node-2's IPIP block through tunl0 to
// node-2's BGP address. Where the kernel has no ipip, tunl0 is birdcage's
// eBPF emulation, which Felix accepts as it is.
func TestRealFelixTakesTheTunnelAddressFromTheDatastore(t *testing.T) {
	felixCmd := calicoFelix(t)
	r := testenv.NewRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// 1. The namespaces, and a tunl0 in node-1's without an address.
	cp, node := cpAndNode(t, r, "ipip")
	if _, err := node.Handle.LinkByName("tunl0"); err != nil {
		tun, err := topo.EmulateTunl0(node.NS.Path(), netip.Addr{}, topo.TunnelEBPF)
		if err != nil {
			testenv.Missing(t, testenv.IPIP, "no kernel tunl0 and the eBPF emulation cannot run: "+err.Error())
		}
		r.DeferLocal("tunl0 programs", tun.Close)
	}
	tunl0, err := node.Handle.LinkByName("tunl0")
	if err != nil {
		t.Fatal(err)
	}
	if as, _ := node.Handle.AddrList(tunl0, netlink.FAMILY_V4); len(as) != 0 {
		t.Fatalf("tunl0 has %v before Felix started; the test needs it bare", as)
	}

	// 2. An IPIP pool, a block each; configuration unset.
	store, err := openStore(r)
	if err != nil {
		t.Fatal(err)
	}
	remote := netip.MustParsePrefix("10.66.0.64/26")
	must(t, store.Put(datastore.KindIPPool, "ipip", datastore.IPPool{Name: "ipip", CIDR: "10.66.0.0/16", IPIPMode: datastore.EncapAlways}))
	must(t, store.Put(datastore.KindNode, "node-1", datastore.Node{Name: "node-1", IPv4Address: "10.250.0.2/24"}))
	must(t, store.Put(datastore.KindNode, "node-2", datastore.Node{Name: "node-2", IPv4Address: "10.250.0.3/24"}))
	must(t, store.Put(datastore.KindBlockAffinity, "b-local", datastore.BlockAffinity{CIDR: "10.66.0.0/26", Node: "node-1"}))
	must(t, store.Put(datastore.KindBlockAffinity, "b-remote", datastore.BlockAffinity{CIDR: remote.String(), Node: "node-2"}))
	if calicoRelease(t, felixCmd) != config.R333 {
		// Before 3.33 Felix programs no IPIP routes unless told to.
		must(t, store.Put(datastore.KindFelixConfiguration, datastore.SingletonName, datastore.FelixConfiguration{ProgramClusterRoutes: string(config.Enabled)}))
	}
	srv, err := Serve(ctx, r, store, ServerOptions{NetNS: cp.NS.Path(), Listen: netip.MustParseAddrPort("10.250.0.1:2379")},
		Options{Release: calicoRelease(t, felixCmd)}, func(_ SyncReport, err error) {
			if err != nil {
				t.Errorf("sync: %v", err)
			}
		})
	if err != nil {
		t.Fatal(err)
	}

	// 3. Felix.
	logPath := filepath.Join(srv.Dir, "felix.log")
	felix := superviseFelix(t, node.NS, felixCmd, srv, logPath)
	r.Defer("felix", felix.Stop)
	felixLog := func() string { b, _ := os.ReadFile(logPath); return tail(string(b), 40) }

	// 4. tunl0 gets node-1's tunnel address, the first of its IPIP block.
	wctx, wcancel := context.WithTimeout(ctx, 90*time.Second)
	defer wcancel()
	var addrs []netlink.Addr
	if err := poll.Until(wctx, 200*time.Millisecond, func() bool {
		addrs, _ = node.Handle.AddrList(tunl0, netlink.FAMILY_V4)
		return len(addrs) > 0
	}); err != nil {
		t.Fatalf("Felix gave tunl0 no address within 90s; Felix's log ends:\n%s", felixLog())
	}
	if len(addrs) != 1 || addrs[0].IPNet.String() != "10.66.0.0/32" {
		t.Errorf("tunl0 addresses %v; want 10.66.0.0/32, node-1's ipv4IPIPTunnelAddr", addrs)
	}

	// 5. node-2's block through tunl0 to node-2's BGP address.
	rt := waitRoute(t, node.Handle, remote, true, 90*time.Second, felixLog)
	if rt.LinkIndex != tunl0.Attrs().Index || rt.Gw.String() != "10.250.0.3" || rt.Protocol != felixProtocol {
		t.Errorf("route to %s: dev index %d via %s proto %d; want dev tunl0 (%d) via 10.250.0.3 proto %d", remote, rt.LinkIndex, rt.Gw, rt.Protocol, tunl0.Attrs().Index, felixProtocol)
	}
	t.Logf("Felix's route: %s proto %d", rt, rt.Protocol)
}
