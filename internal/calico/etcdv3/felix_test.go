package etcdv3

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/internal/testenv"
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
	cp := testenv.NetNSIn(t, r, "felixcp")
	node := testenv.NetNSIn(t, r, "felixnode")
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

	// 2. The cluster model: a no-encap pool, node-2's block, Felix told to
	// program no-encap cluster routes.
	store, err := datastore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	remote := netip.MustParsePrefix("10.65.0.64/26")
	must(t, store.Put(datastore.KindIPPool, "noencap", datastore.IPPool{Name: "noencap", CIDR: "10.65.0.0/16", IPIPMode: datastore.EncapNever}))
	must(t, store.Put(datastore.KindNode, "node-1", datastore.Node{Name: "node-1", IPv4Address: "10.250.0.2/24"}))
	must(t, store.Put(datastore.KindNode, "node-2", datastore.Node{Name: "node-2", IPv4Address: "10.250.0.3/24"}))
	must(t, store.Put(datastore.KindBlockAffinity, "b-local", datastore.BlockAffinity{CIDR: "10.65.0.0/26", Node: "node-1"}))
	must(t, store.Put(datastore.KindBlockAffinity, "b-remote", datastore.BlockAffinity{CIDR: remote.String(), Node: "node-2"}))
	must(t, store.Put(datastore.KindFelixConfiguration, datastore.SingletonName, datastore.FelixConfiguration{ProgramClusterRoutes: string(config.Enabled)}))
	must(t, store.Put(datastore.KindBGPConfiguration, datastore.SingletonName, datastore.BGPConfiguration{ProgramClusterRoutes: string(config.Disabled)}))

	srv, err := Serve(ctx, r, store, ServerOptions{NetNS: cp.NS.Path(), Listen: netip.MustParseAddrPort("10.250.0.1:2379")},
		Options{Release: config.R333}, func(_ SyncReport, err error) {
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

	// 3. Felix in node-1's namespace, its files in a mount namespace of
	// its own so it writes nothing on the host.
	logPath := filepath.Join(srv.Dir, "felix.log")
	felix := startFelix(t, node.NS, felixCmd, srv, logPath)
	r.Defer("felix", func() error { return stopProcess(felix) })
	felixLog := func() string { b, _ := os.ReadFile(logPath); return tail(string(b), 40) }

	// 4. Felix programs the remote block via node-2, proto 80.
	rt := waitRoute(t, node.Handle, remote, true, 90*time.Second, felixLog)
	if rt.Protocol != felixProtocol || rt.Gw.String() != "10.250.0.3" {
		t.Errorf("route to %s: proto %d via %s; want proto %d via 10.250.0.3", remote, rt.Protocol, rt.Gw, felixProtocol)
	}
	t.Logf("Felix's route: %s", rt)

	// 5. The live change: programClusterRoutes Disabled in the model; Felix
	// takes its route away.
	must(t, store.Put(datastore.KindFelixConfiguration, datastore.SingletonName, datastore.FelixConfiguration{ProgramClusterRoutes: string(config.Disabled)}))
	waitRoute(t, node.Handle, remote, false, 90*time.Second, felixLog)
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

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// startFelix runs Felix in netns with the environment calico-node's felix
// service gives it (node/filesystem/etc/service/available/felix/run) and a
// private mount namespace with tmpfs over /var/run/calico and
// /var/lib/calico, where Felix keeps its files.
func startFelix(t *testing.T, netns ns.NetNS, felix []string, srv *Server, logPath string) *exec.Cmd {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	script := `set -e
for d in /var/run/calico /var/lib/calico; do [ -d "$d" ] && mount -t tmpfs tmpfs "$d"; done
exec "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "felix"}, felix...)...)
	cmd.Env = append(os.Environ(), srv.Env()...)
	cmd.Env = append(cmd.Env,
		"FELIX_FELIXHOSTNAME=node-1",
		"FELIX_LOGSEVERITYSCREEN=Info",
		"FELIX_LOGFILEPATH=none",
		"FELIX_LOGSEVERITYSYS=none",
		"FELIX_HEALTHENABLED=false",
		"FELIX_IPV6SUPPORT=false",
		"FELIX_USAGEREPORTINGENABLED=false",
		"FELIX_DebugSkipCTLBCleanup=true", // a Felix built without cgo panics in the libbpf stub otherwise (issue 45)
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := netns.Do(func(ns.NetNS) error { return cmd.Start() }); err != nil {
		t.Fatalf("start felix (%s): %v", strings.Join(felix, " "), err)
	}
	return cmd
}

func stopProcess(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
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
