// This root test holds the process contract in place by running the built
// programmer binary inside a node's network namespace against a DirStore:
//  1. It programs the node's cluster routes and local workload routes, takes
//     a BIRD route for a wanted destination and removes a stray BIRD route
//     via tunl0 (3.33, owning IPIP), and reports it in the status file.
//  2. A block change is applied live (no exit).
//  3. A programClusterRoutes change makes it exit with ExitConfigChanged.
//  4. Restarted, it exits 0 on SIGTERM and leaves its routes.
package programmer_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/programmer"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/vishvananda/netlink"
)

// programmerBinary builds cmd/birdcage-programmer, or returns
// $BIRDCAGE_PROGRAMMER (a user's own binary with the same contract).
func programmerBinary(t testing.TB) string {
	t.Helper()
	if p := testenv.Env().Programmer; p != "" {
		return p
	}
	out := filepath.Join(t.TempDir(), "birdcage-programmer")
	cmd := exec.Command("go", "build", "-o", out, "github.com/birdcage/birdcage/cmd/birdcage-programmer")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build programmer: %v\n%s", err, b)
	}
	return out
}

type node struct {
	name string
	h    *netlink.Handle
	r    *run.Run
	ns   *testenv.NetNS
}

func newNode(t testing.TB) *node {
	t.Helper()
	n := testenv.NewNetNS(t, "prog")
	nd := &node{name: n.Name, h: n.Handle, r: n.Run, ns: n}
	nd.veth(t, "eth0", "eth0p", "10.0.1.11/24")
	nd.veth(t, "cali1", "cali1p")
	if l, err := nd.h.LinkByName("tunl0"); err == nil && l.Type() == "ipip" {
		_ = nd.h.LinkSetUp(l)
	} else {
		nd.veth(t, "tunl0", "tunl0p") // stand-in where the kernel has no ipip
	}
	return nd
}

func (nd *node) veth(t testing.TB, name, peer string, addrs ...string) {
	t.Helper()
	nd.ns.Veth(t, name, peer, addrs...)
}

// route returns "proto P via GW dev D" for the main-table route to dst at
// metric 0, or "" if there is none.
func (nd *node) route(t testing.TB, dst string) string {
	t.Helper()
	_, ipn, _ := net.ParseCIDR(dst)
	rs, err := nsutil.Routes(nd.h, netlink.FAMILY_V4, &netlink.Route{Dst: ipn, Table: 254}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Priority == 0 {
			l, _ := nd.h.LinkByIndex(r.LinkIndex)
			return fmt.Sprintf("proto %d via %s dev %s", r.Protocol, r.Gw, l.Attrs().Name)
		}
	}
	return ""
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *strings.Builder
}

func (nd *node) start(t testing.TB, bin, dir, status string, extra ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{}), log: &strings.Builder{}}
	args := append([]string{"netns", "exec", nd.name, bin, "--node", "node-1", "--datastore", dir,
		"--release", "3.33", "--status", status, "--log-format", "json"}, extra...)
	p.cmd = exec.Command("ip", args...)
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start programmer: %v", err)
	}
	pid := p.cmd.Process.Pid
	nd.r.Defer(fmt.Sprintf("programmer pid %d", pid), func() error {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-p.done
		}
		return nil
	})
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p
}

func (p *proc) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("programmer did not exit within %s; log:\n%s", timeout, p.log)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("wait: %v", p.err)
	}
	return 0
}

// eventually polls cond every 20ms until it returns "" or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if last = cond(); last == "" {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
	t.Fatalf("%s: not within %s: %s", what, timeout, last)
}

func TestDaemonBinaryContract(t *testing.T) {
	nd := newNode(t)
	bin := programmerBinary(t)
	dir := nd.r.Path("datastore")
	status := nd.r.Path("programmer.status.json")
	st, err := datastore.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	put := func(kind datastore.Kind, name string, doc any) {
		t.Helper()
		if err := st.Put(kind, name, doc); err != nil {
			t.Fatal(err)
		}
	}
	put(datastore.KindIPPool, "ipip", datastore.IPPool{CIDR: "10.65.0.0/16", IPIPMode: "Always"})
	put(datastore.KindNode, "node-1", datastore.Node{IPv4Address: "10.0.1.11/24"}) // uplink found from the kernel
	put(datastore.KindNode, "node-2", datastore.Node{IPv4Address: "10.0.1.12/24"})
	put(datastore.KindBlockAffinity, "b1", datastore.BlockAffinity{CIDR: "10.65.1.0/26", Node: "node-1"})
	put(datastore.KindBlockAffinity, "b2", datastore.BlockAffinity{CIDR: "10.65.2.0/26", Node: "node-2"})
	put(datastore.KindWorkload, "w1", datastore.Workload{Node: "node-1", Interface: "cali1", Addresses: []string{"10.65.1.5/32"}})
	put(datastore.KindFelixConfiguration, "", datastore.FelixConfiguration{RouteRefreshInterval: "2s"})

	// BIRD's persisted routes: one the programmer wants, one stray.
	tun, _ := nd.h.LinkByName("tunl0")
	for _, dst := range []string{"10.65.2.0/26", "10.65.9.0/26"} {
		_, ipn, _ := net.ParseCIDR(dst)
		if err := nd.h.RouteAdd(&netlink.Route{Dst: ipn, Gw: net.ParseIP("10.0.1.13"), LinkIndex: tun.Attrs().Index,
			Flags: int(netlink.FLAG_ONLINK), Protocol: netlink.RouteProtocol(kroute.ProtoBIRD)}); err != nil {
			t.Fatal(err)
		}
	}

	// 1. Start: routes programmed, stray gone, status reports it.
	p := nd.start(t, bin, dir, status)
	eventually(t, 10*time.Second, "initial programming", func() string {
		s, err := programmer.ReadStatus(status)
		if err != nil || s.State != programmer.StateRunning || s.LastSyncUnixNano == 0 || s.RoutesOwned != 2 {
			return fmt.Sprintf("status %+v %v", s, err)
		}
		if r := nd.route(t, "10.65.2.0/26"); r != "proto 80 via 10.0.1.12 dev tunl0" {
			return "10.65.2.0/26: " + r
		}
		if r := nd.route(t, "10.65.1.5/32"); r != "proto 80 via <nil> dev cali1" {
			return "10.65.1.5/32: " + r
		}
		if r := nd.route(t, "10.65.9.0/26"); r != "" {
			return "stray still there: " + r
		}
		return ""
	})
	s, _ := programmer.ReadStatus(status)
	if s.Node != "node-1" || s.Release != "3.33" || s.ProgramClusterRoutes != "EnabledIPIPOnly" || !s.ClaimsBIRDTunnelRoutes ||
		s.DeviceRouteProtocol != 80 || s.LastSyncMonotonicNano == 0 || s.PID == 0 {
		t.Errorf("status: %+v", s)
	}
	// 3.33's Felix choices, no knob set: delete-first, wildcard deletes,
	// IPIP routes at the uplink's MTU (1500) - 20, one request at a time.
	if s.WriteOrder != "delete-first" || s.DeleteNamesProtocol || s.TunnelMTU != 1480 || s.WriteWindow != 1 {
		t.Errorf("route table options in the status: writeOrder %q deleteNamesProtocol %v tunnelMTU %d writeWindow %d; want delete-first, false, 1480, 1",
			s.WriteOrder, s.DeleteNamesProtocol, s.TunnelMTU, s.WriteWindow)
	}
	if !strings.Contains(p.log.String(), `"msg":"route replaced"`) || !strings.Contains(p.log.String(), `"msg":"route deleted"`) {
		t.Errorf("log lacks route replaced/deleted lines:\n%s", p.log)
	}

	// 2. A live change: a new block is programmed without a restart.
	put(datastore.KindBlockAffinity, "b3", datastore.BlockAffinity{CIDR: "10.65.3.0/26", Node: "node-2"})
	eventually(t, 5*time.Second, "live block change", func() string {
		if r := nd.route(t, "10.65.3.0/26"); r != "proto 80 via 10.0.1.12 dev tunl0" {
			return "10.65.3.0/26: " + r
		}
		return ""
	})

	// A workload whose veth appears after its document: programmed once the
	// device exists (the failure is counted, then retried).
	put(datastore.KindWorkload, "w2", datastore.Workload{Node: "node-1", Interface: "cali2", Addresses: []string{"10.65.1.6/32"}})
	eventually(t, 5*time.Second, "missing device reported", func() string {
		if s, _ := programmer.ReadStatus(status); s.SyncErrors == 0 || !strings.Contains(s.LastError, "cali2") {
			return fmt.Sprintf("status %+v", s)
		}
		return ""
	})
	nd.veth(t, "cali2", "cali2p")
	eventually(t, 5*time.Second, "late workload device", func() string {
		if r := nd.route(t, "10.65.1.6/32"); r != "proto 80 via <nil> dev cali2" {
			return "10.65.1.6/32: " + r
		}
		return ""
	})

	// 3. A restart-relevant change: exit ExitConfigChanged, routes stay.
	put(datastore.KindFelixConfiguration, "", datastore.FelixConfiguration{RouteRefreshInterval: "2s", ProgramClusterRoutes: "Disabled"})
	if code := p.wait(t, 10*time.Second); code != programmer.ExitConfigChanged {
		t.Fatalf("exit code after programClusterRoutes change: %d, want %d; log:\n%s", code, programmer.ExitConfigChanged, p.log)
	}
	if s, _ := programmer.ReadStatus(status); s.State != programmer.StateConfigChanged {
		t.Errorf("status after config change: %+v", s)
	}
	if r := nd.route(t, "10.65.3.0/26"); r == "" {
		t.Error("routes should stay in the kernel while the programmer restarts")
	}

	// 4. Restarted with Disabled: it wants no IPIP routes, and its own
	// proto 80 routes on tunl0 are still its by protocol, so it removes them
	// (as Felix does; BIRD must program them again — the gap scenario 3
	// measures). Local workload routes stay. SIGTERM stops it with 0.
	p = nd.start(t, bin, dir, status)
	eventually(t, 10*time.Second, "restart", func() string {
		s, err := programmer.ReadStatus(status)
		if err != nil || s.State != programmer.StateRunning || s.ProgramClusterRoutes != "Disabled" || s.LastSyncUnixNano == 0 {
			return fmt.Sprintf("status %+v %v", s, err)
		}
		if r := nd.route(t, "10.65.3.0/26"); r != "" {
			return "IPIP route kept by a programmer that no longer owns IPIP: " + r
		}
		if r := nd.route(t, "10.65.1.5/32"); r == "" {
			return "local workload route removed"
		}
		return ""
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Errorf("exit code after SIGTERM: %d; log:\n%s", code, p.log)
	}
	if s, _ := programmer.ReadStatus(status); s.State != programmer.StateStopped {
		t.Errorf("status after SIGTERM: %+v", s)
	}
}
