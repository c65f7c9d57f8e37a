// Package handmade builds a lab the way a team's own script would — not
// with birdcage's builder (topo/) or cluster (harness/): namespaces, veths,
// addresses and sysctls by `ip` and `sysctl` commands, and per node a
// bash agent playing the calico-node container (the route programmer under
// a restart loop, BIRD started on command). It is shaped like a kind
// cluster running calico-node on a no-encap pool: three nodes on one L2
// segment, a Calico-style workload per node. Actions are shell scripts.
//
// It exists to test the attach mode (harness/lab) against something
// birdcage did not build. The BIRD configs are rendered ahead of time by
// harness/confd for every programClusterRoutes value, which is what the
// lab's "confd" installs; the datastore is birdcage's directory format,
// which the programmer reads.
package handmade

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/birdcage/birdcage/dataplane/programmer"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/confd"
	"github.com/birdcage/birdcage/harness/lab"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/run"
)

//go:embed agent.sh
var agentScript []byte

//go:embed set-program-cluster-routes.sh
var setScript []byte

//go:embed upgrade.sh
var upgradeScript []byte

// Options shape the lab.
type Options struct {
	// Nodes is the node count (default 3, at most 9).
	Nodes int
	// Release every node starts on (default 3.33).
	Release config.Release
	// Felix and BGP are the initial programClusterRoutes values ("": unset).
	Felix, BGP config.ProgramClusterRoutes
	// Programmer is the route programmer binary (default
	// $BIRDCAGE_PROGRAMMER).
	Programmer string
	// Timing gives the programmer's restart profile and the lab confd's
	// latency, so the lab runs under the same model as the built-in target.
	Timing harness.TimingModel
}

// Lab is a built hand-made lab.
type Lab struct {
	// Manifest is the path of its lab manifest.
	Manifest string
	// Dir holds its datastore, node directories and scripts.
	Dir string
	// Namespaces are the named namespaces it made (for the caller's
	// before/after checks).
	Namespaces []string
}

const pool = "10.244.0.0/16"

// Build makes the lab under r (everything carries r's prefix and is removed
// when r closes) and writes its manifest.
func Build(ctx context.Context, r *run.Run, o Options) (*Lab, error) {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Nodes > 9 {
		return nil, fmt.Errorf("handmade lab: %d nodes: at most 9", o.Nodes)
	}
	if o.Release == "" {
		o.Release = config.R333
	}
	if o.Programmer == "" {
		o.Programmer = os.Getenv(harness.ProgrammerEnv)
	}
	if o.Programmer == "" {
		return nil, fmt.Errorf("handmade lab: no programmer binary: set %s (CGO_ENABLED=0 go build -o bin/birdcage-programmer ./cmd/birdcage-programmer)", harness.ProgrammerEnv)
	}
	prog, err := filepath.Abs(o.Programmer)
	if err != nil {
		return nil, err
	}
	dir, err := r.TempDir("lab")
	if err != nil {
		return nil, err
	}
	l := &Lab{Dir: dir, Manifest: filepath.Join(dir, "lab.yaml")}
	for name, body := range map[string][]byte{"agent.sh": agentScript, "set-program-cluster-routes.sh": setScript, "upgrade.sh": upgradeScript} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "confd-latency"), fmt.Appendf(nil, "%.3f\n", o.Timing.ConfdLatency.Seconds()), 0o644); err != nil {
		return nil, err
	}

	// 1. Namespaces: a switch (a bridge) and per node one for the node and
	// one for its workload.
	netns := func(what string) (string, error) {
		name := r.Name("lab-" + what)
		if err := ip(ctx, "netns", "add", name); err != nil {
			return "", err
		}
		r.Defer("lab netns "+name, func() error { return ip(context.Background(), "netns", "del", name) })
		l.Namespaces = append(l.Namespaces, name)
		// An IPv4-only lab: no link-local routes appearing after the fact.
		return name, sysctl(ctx, name, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	sw, err := netns("sw")
	if err != nil {
		return nil, err
	}
	if err := ipIn(ctx, sw, "link add br0 type bridge", "link set br0 up"); err != nil {
		return nil, err
	}

	// 2. The datastore the programmers read.
	ds, err := datastore.OpenDir(filepath.Join(dir, "datastore"))
	if err != nil {
		return nil, err
	}
	var putErr error
	put := func(k datastore.Kind, name string, doc any) {
		if putErr == nil {
			putErr = ds.Put(k, name, doc)
		}
	}
	put(datastore.KindIPPool, "pool", datastore.IPPool{Name: "pool", CIDR: pool, IPIPMode: datastore.EncapNever, VXLANMode: datastore.EncapNever, BlockSize: 26})
	put(datastore.KindFelixConfiguration, "", datastore.FelixConfiguration{ProgramClusterRoutes: string(o.Felix), RouteRefreshInterval: "5s"})
	put(datastore.KindBGPConfiguration, "", datastore.BGPConfiguration{ProgramClusterRoutes: string(o.BGP)})

	m := lab.Manifest{Name: "handmade", Pools: []string{pool}, Datastore: &lab.Datastore{Dir: filepath.Join(dir, "datastore")}}
	type node struct{ name, ns, wl string }
	var nodes []node
	for i := 1; i <= o.Nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		nns, err := netns(fmt.Sprintf("n%d", i))
		if err != nil {
			return nil, err
		}
		wns, err := netns(fmt.Sprintf("n%d-w", i))
		if err != nil {
			return nil, err
		}
		addr := fmt.Sprintf("10.10.0.%d/24", 10+i)
		block := netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/26", i))
		wl := block.Addr().Next().Next()
		hostIf := fmt.Sprintf("cali%d", i)
		// 3. The node's uplink on the switch, its sysctls, its workload's
		// veth as Calico's CNI plugin makes it.
		steps := []error{
			ip(ctx, "-n", sw, "link", "add", "sw-"+name, "type", "veth", "peer", "name", "eth0", "netns", nns),
			ipIn(ctx, sw, "link set sw-"+name+" master br0", "link set sw-"+name+" up"),
			ipIn(ctx, nns, "link set lo up", "addr add "+addr+" dev eth0", "link set eth0 up"),
			sysctl(ctx, nns, "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"),
			ip(ctx, "-n", nns, "link", "add", hostIf, "address", "ee:ee:ee:ee:ee:ee", "type", "veth", "peer", "name", "eth0", "netns", wns),
			sysctl(ctx, nns, "net.ipv4.conf."+hostIf+".proxy_arp=1"),
			ipIn(ctx, nns, "link set "+hostIf+" up", "route replace "+wl.String()+"/32 dev "+hostIf+" scope link"),
			ipIn(ctx, wns, "link set lo up", "link set eth0 up", "addr add "+wl.String()+"/32 dev eth0",
				"neigh add 169.254.1.1 lladdr ee:ee:ee:ee:ee:ee dev eth0 nud permanent",
				"route add 169.254.1.1 dev eth0 scope link", "route add default via 169.254.1.1 dev eth0"),
		}
		if err := errors.Join(steps...); err != nil {
			return nil, fmt.Errorf("handmade lab: %s: %w", name, err)
		}
		put(datastore.KindNode, name, datastore.Node{Name: name, IPv4Address: addr, Uplinks: []datastore.Uplink{{Interface: "eth0", Address: addr}}})
		put(datastore.KindBlockAffinity, fmt.Sprintf("10-244-%d-0-26", i), datastore.BlockAffinity{CIDR: block.String(), Node: name})
		put(datastore.KindWorkload, name+"-wl", datastore.Workload{Name: name + "-wl", Node: name, Interface: hostIf, Addresses: []string{wl.String() + "/32"}})
		m.Nodes = append(m.Nodes, lab.Node{
			Name: name, Netns: lab.NetnsRef{Path: "/var/run/netns/" + nns}, Interfaces: []string{"eth0"},
			Workloads: []lab.Workload{{Name: name + "-wl", Netns: lab.NetnsRef{Path: "/var/run/netns/" + wns}, Interface: "eth0", Address: wl.String()}},
		})
		nodes = append(nodes, node{name, nns, wns})
	}
	if putErr != nil {
		return nil, fmt.Errorf("handmade lab: datastore: %w", putErr)
	}

	// 4. Every node's BIRD config for every release and BGPConfiguration
	// value, rendered now: what the lab's confd installs on a change.
	cluster, err := ds.Read(ctx)
	if err != nil {
		return nil, err
	}
	values := append([]config.ProgramClusterRoutes{""}, config.Enabled, config.Disabled, config.EnabledIPIPOnly, config.EnabledNoEncapOnly)
	for _, n := range nodes {
		nd := filepath.Join(dir, "nodes", n.name)
		if err := os.MkdirAll(nd, 0o755); err != nil {
			return nil, err
		}
		for _, rel := range []config.Release{config.Pre333, config.R333} {
			for _, v := range values {
				c := *cluster
				c.BGP.ProgramClusterRoutes = string(v)
				rd, err := confd.Render(&c, n.name, rel, confd.Options{Log: slog.New(slog.DiscardHandler),
					Timers: confd.Timers{ScanTime: int(o.Timing.BIRDScanTime / time.Second)}})
				if err != nil {
					return nil, err
				}
				name := string(v)
				if name == "" {
					name = "unset"
				}
				if err := os.WriteFile(filepath.Join(nd, fmt.Sprintf("bird.%s.%s.conf", rel, name)), rd.Config, 0o644); err != nil {
					return nil, err
				}
			}
		}
		cur := string(o.BGP)
		if cur == "" {
			cur = "unset"
		}
		if err := copyFile(filepath.Join(nd, fmt.Sprintf("bird.%s.%s.conf", o.Release, cur)), filepath.Join(nd, "bird.conf")); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(nd, "release"), []byte(string(o.Release)+"\n"), 0o644); err != nil {
			return nil, err
		}
		if err := syscall.Mkfifo(filepath.Join(nd, "ctl"), 0o600); err != nil {
			return nil, err
		}
		// 5. The node agent, inside the node's namespace.
		if err := startAgent(r, nd, n.ns, n.name, filepath.Join(dir, "datastore"), prog, o.Timing); err != nil {
			return nil, err
		}
	}

	// 6. The manifest: actions are the lab's scripts.
	m.Actions = lab.Actions{
		SetProgramClusterRoutes: "{manifestDir}/set-program-cluster-routes.sh {manifestDir} {felix} {bgp}",
		Upgrade:                 "{manifestDir}/upgrade.sh {manifestDir} {node} {release} {signal}",
		KillBIRD:                "kill -s {signal} $(cat {manifestDir}/nodes/{node}/bird.pid)",
		StartBIRD:               "echo bird-start {recovery} > {manifestDir}/nodes/{node}/ctl",
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	head := "# A hand-made lab (harness/lab/handmade), written by its builder.\n"
	if err := os.WriteFile(l.Manifest, append([]byte(head), b...), 0o644); err != nil {
		return nil, err
	}
	return l, nil
}

// WaitReady waits until the lab has settled: every node's remote blocks
// routed only by protocol (BIRD's 12 or the programmer's 80, as the initial
// configuration makes them) and each workload's route written by the
// programmer. It attaches to watch and detaches again.
func (l *Lab) WaitReady(ctx context.Context, protocol kroute.Protocol) error {
	m, err := lab.Load(l.Manifest)
	if err != nil {
		return err
	}
	a, err := lab.Attach(ctx, m, lab.AttachOptions{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer a.Detach()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, n := range a.Nodes {
		for _, b := range a.RemoteBlocks(n.Name) {
			if err := a.WaitOwnedOnlyBy(ctx, n.Name, b, protocol); err != nil {
				return fmt.Errorf("handmade lab not ready: %w", err)
			}
		}
		for _, w := range n.Workloads {
			if err := a.WaitOwnedOnlyBy(ctx, n.Name, netip.PrefixFrom(w.Addr, 32), m.RouteProtocol()); err != nil {
				return fmt.Errorf("handmade lab not ready: %w", err)
			}
		}
	}
	return nil
}

// startAgent runs the node agent in the node's namespace and registers its
// stop: the agent stops BIRD and the programmer; whatever is left of its
// process group after that is killed.
func startAgent(r *run.Run, nd, nns, node, ds, prog string, timing harness.TimingModel) error {
	cmd := exec.Command("ip", "netns", "exec", nns, "bash", filepath.Join(filepath.Dir(filepath.Dir(nd)), "agent.sh"), nd, node, ds, prog)
	cmd.Env = append(os.Environ(),
		programmer.StartupDelayEnv+"="+timing.ProgrammerStartupDelay.String(),
		programmer.ResyncDelayPerRouteEnv+"="+timing.ProgrammerResyncPerRoute.String())
	log, err := os.Create(filepath.Join(nd, "agent.log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("handmade lab: agent of %s: %w", node, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); log.Close() }()
	r.Defer("lab agent "+node, func() error {
		// The FIFO write blocks until the agent reads; a dead agent never
		// will, so write in the background and bound the wait.
		go func() {
			if f, err := os.OpenFile(filepath.Join(nd, "ctl"), os.O_WRONLY, 0); err == nil {
				f.WriteString("stop\n")
				f.Close()
			}
		}()
		select {
		case <-done:
			return nil
		case <-time.After(10 * time.Second):
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-done:
			return nil
		case <-time.After(10 * time.Second):
			return fmt.Errorf("handmade lab: agent of %s did not exit", node)
		}
	})
	return nil
}

// ip runs one ip command.
func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ipIn runs ip commands (each a space-separated line) in a namespace.
func ipIn(ctx context.Context, ns string, lines ...string) error {
	for _, l := range lines {
		if err := ip(ctx, append([]string{"-n", ns}, strings.Fields(l)...)...); err != nil {
			return err
		}
	}
	return nil
}

func sysctl(ctx context.Context, ns string, kv ...string) error {
	args := append([]string{"netns", "exec", ns, "sysctl", "-qw"}, kv...)
	return ip(ctx, args...)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
