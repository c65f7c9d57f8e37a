// Package handmade builds a lab the way a team's own script would — not
// with birdcage's builder (topo/) or cluster (harness/): namespaces, veths,
// addresses and sysctls by `ip`, `nsenter` and `sysctl` commands, and per
// node a bash agent playing the calico-node container (the route programmer
// under a restart loop, BIRD started on command). It is shaped like a kind
// cluster running calico-node: three nodes on one L2 segment, a
// Calico-style workload per node, a no-encap or an IPIP pool. Actions are
// shell scripts.
//
// It comes in two flavours. In the ip-netns one every node and workload is
// a named namespace (`ip netns add`) and the agent runs under `ip netns
// exec`. In the runc one — kind's shape — every node is a runc container
// with a network namespace of its own, made by runc, its agent the
// container's init, so the programmer and BIRD run inside it; every
// workload is a runc "pod" container of its own. The manifest then names
// nodes and workloads by container (resolved through `runc state`), and its
// actions are `runc exec` commands; the lab is stopped with `runc kill`.
// Only the switch between the nodes (a bridge, kind's docker network) is a
// named namespace in both.
//
// It exists to test the attach mode (harness/lab) against something
// birdcage did not build. The BIRD configs are rendered ahead of time by
// dataplane/confd for every programClusterRoutes value and release, which is
// what the lab's "confd" installs; the datastore is birdcage's directory
// format, which the programmer reads.
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

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/dataplane/timing"
	"github.com/birdcage/birdcage/harness/lab"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/topo"
)

//go:embed agent.sh
var agentScript []byte

//go:embed set-program-cluster-routes.sh
var setScript []byte

//go:embed upgrade.sh
var upgradeScript []byte

// Flavour is how the lab makes its nodes.
type Flavour string

const (
	// NetnsFlavour: named namespaces (`ip netns add`), agents under `ip
	// netns exec`.
	NetnsFlavour Flavour = "netns"
	// RuncFlavour: each node a runc container with its own network
	// namespace, the agent its init; each workload a runc container.
	RuncFlavour Flavour = "runc"
)

// Options shape the lab.
type Options struct {
	// Flavour is NetnsFlavour (default) or RuncFlavour.
	Flavour Flavour
	// IPIP makes the pool IPIP (ipipMode Always, tunl0 up on every node);
	// the default is a no-encap pool. tunl0 is the kernel's where it has
	// ipip, else birdcage's eBPF emulation, as topo.DetectFeatures proves
	// (BIRDCAGE_TUNNEL forces either); the results record which.
	IPIP bool
	// Nodes is the node count (default 3, at most 9).
	Nodes int
	// Release every node starts on (default 3.33).
	Release config.Release
	// Felix and BGP are the initial programClusterRoutes values ("": unset).
	Felix, BGP config.ProgramClusterRoutes
	// KernelMetric, when set, is BGPConfiguration.kernelMetric: BIRD
	// writes every route at this metric instead of the release's (a
	// departure, recorded in the rendered configs).
	KernelMetric *int
	// Programmer is the route programmer binary (required: the run's
	// $BIRDCAGE_PROGRAMMER, or one the caller built).
	Programmer string
	// Timing gives the programmer's restart profile and the lab confd's
	// latency, so the lab runs under the same model as the built-in target.
	Timing timing.Model
}

// Lab is a built hand-made lab.
type Lab struct {
	// Manifest is the path of its lab manifest.
	Manifest string
	// Dir holds its datastore, node directories and scripts.
	Dir string
	// Namespaces are the named namespaces it made (for the caller's
	// before/after checks): in the runc flavour only the switch's.
	Namespaces []string
	// RuncRoot and Containers are runc's state directory and the
	// containers made in the runc flavour (nodes, then their workloads).
	RuncRoot   string
	Containers []string
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
	if o.Flavour == "" {
		o.Flavour = NetnsFlavour
	}
	if o.Flavour != NetnsFlavour && o.Flavour != RuncFlavour {
		return nil, fmt.Errorf("handmade lab: flavour %q: want %s or %s", o.Flavour, NetnsFlavour, RuncFlavour)
	}
	if o.Release == "" {
		o.Release = config.R333
	}
	if o.Programmer == "" {
		return nil, fmt.Errorf("handmade lab: no programmer binary: set %s (CGO_ENABLED=0 go build -o bin/birdcage-programmer ./cmd/birdcage-programmer)", env.Programmer)
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
	var tunnelMode string
	if o.IPIP {
		// The lab's nodes stand for a cluster's: tunl0 is what this kernel
		// gives (the ipip module's device, made by the lab's own ip
		// commands), else what birdcage's built nodes get here.
		f, err := topo.DetectFeatures(r)
		switch {
		case err != nil:
			return nil, fmt.Errorf("handmade lab: %w", err)
		case !f.IPIP && f.TunnelErr != nil:
			return nil, fmt.Errorf("handmade lab: %w", f.TunnelErr)
		case !f.IPIP:
			return nil, noIPIP{errors.New("the kernel has no ipip and the eBPF emulation cannot run here")}
		}
		tunnelMode = f.TunnelMode()
	}
	var rc *runcLab
	if o.Flavour == RuncFlavour {
		if rc, err = newRuncLab(r, dir, prog, o.Timing); err != nil {
			return nil, err
		}
		l.RuncRoot = rc.root
		// The lab's scripts reach a node's software through runc.
		if err := os.WriteFile(filepath.Join(dir, "runc-root"), []byte(rc.root+"\n"), 0o644); err != nil {
			return nil, err
		}
	}

	// 1. Namespaces: a switch (a bridge) and, in the ip-netns flavour, per
	// node one for the node and one for its workload.
	netns := func(what string) (where, error) {
		name := r.Name("lab-" + what)
		if err := ip(ctx, "netns", "add", name); err != nil {
			return where{}, err
		}
		r.Defer("lab netns "+name, func() error { return ip(context.Background(), "netns", "del", name) })
		l.Namespaces = append(l.Namespaces, name)
		w := where{name: name}
		// An IPv4-only lab: no link-local routes appearing after the fact.
		return w, sysctl(ctx, w, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	swNS, err := netns("sw")
	if err != nil {
		return nil, err
	}
	sw := swNS.name
	if err := ipIn(ctx, swNS, "link add br0 type bridge", "link set br0 up"); err != nil {
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
	ipipMode := datastore.EncapNever
	if o.IPIP {
		ipipMode = datastore.EncapAlways
	}
	put(datastore.KindIPPool, "pool", datastore.IPPool{Name: "pool", CIDR: pool, IPIPMode: ipipMode, VXLANMode: datastore.EncapNever, BlockSize: 26})
	put(datastore.KindFelixConfiguration, "", datastore.FelixConfiguration{ProgramClusterRoutes: string(o.Felix), RouteRefreshInterval: "5s"})
	put(datastore.KindBGPConfiguration, "", datastore.BGPConfiguration{ProgramClusterRoutes: string(o.BGP), KernelMetric: o.KernelMetric})

	m := lab.Manifest{Name: "handmade", Pools: []string{pool}, Datastore: &lab.Datastore{Dir: filepath.Join(dir, "datastore")}}
	if rc != nil {
		m.Name, m.Runtime, m.RuncRoot = "handmade-runc", "runc", rc.root
	}
	if o.IPIP {
		m.Name += "-ipip"
	}
	type node struct {
		name string
		ns   where
		ctr  *container // the node's container (runc flavour)
		pods []*container
	}
	var nodes []node
	for i := 1; i <= o.Nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		nd := node{name: name}
		var wns where
		nodeRef, wlRef := lab.NetnsRef{}, lab.NetnsRef{}
		if rc == nil {
			if nd.ns, err = netns(fmt.Sprintf("n%d", i)); err != nil {
				return nil, err
			}
			if wns, err = netns(fmt.Sprintf("n%d-w", i)); err != nil {
				return nil, err
			}
			nodeRef.Path, wlRef.Path = "/var/run/netns/"+nd.ns.name, "/var/run/netns/"+wns.name
		} else {
			// Created, not started: the namespace exists, the agent
			// waits for `runc start` while the network is plugged.
			if nd.ctr, err = rc.create(ctx, "lab-"+name, name, rc.nodeProcess(dir, name, prog)); err != nil {
				return nil, err
			}
			pod, err := rc.create(ctx, "lab-"+name+"-wl", name+"-wl", podProcess())
			if err != nil {
				return nil, err
			}
			nd.pods = append(nd.pods, pod)
			l.Containers = append(l.Containers, nd.ctr.id, pod.id)
			nd.ns, wns = where{pid: nd.ctr.pid}, where{pid: pod.pid}
			nodeRef.Container, wlRef.Container = nd.ctr.id, pod.id
			if err := sysctl(ctx, nd.ns, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"); err != nil {
				return nil, err
			}
			if err := sysctl(ctx, wns, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"); err != nil {
				return nil, err
			}
		}
		addr := fmt.Sprintf("10.10.0.%d/24", 10+i)
		block := netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/26", i))
		wl := block.Addr().Next().Next()
		hostIf := fmt.Sprintf("cali%d", i)
		// 3. The node's uplink on the switch, its sysctls, its workload's
		// veth as Calico's CNI plugin makes it.
		steps := []error{
			ip(ctx, "-n", sw, "link", "add", "sw-"+name, "type", "veth", "peer", "name", "eth0", "netns", nd.ns.target()),
			ipIn(ctx, swNS, "link set sw-"+name+" master br0", "link set sw-"+name+" up"),
			ipIn(ctx, nd.ns, "link set lo up", "addr add "+addr+" dev eth0", "link set eth0 up"),
			sysctl(ctx, nd.ns, "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"),
			ipIn(ctx, nd.ns, "link add "+hostIf+" address ee:ee:ee:ee:ee:ee type veth peer name eth0 netns "+wns.target()),
			sysctl(ctx, nd.ns, "net.ipv4.conf."+hostIf+".proxy_arp=1"),
			ipIn(ctx, nd.ns, "link set "+hostIf+" up", "route replace "+wl.String()+"/32 dev "+hostIf+" scope link"),
			ipIn(ctx, wns, "link set lo up", "link set eth0 up", "addr add "+wl.String()+"/32 dev eth0",
				"neigh add 169.254.1.1 lladdr ee:ee:ee:ee:ee:ee dev eth0 nud permanent",
				"route add 169.254.1.1 dev eth0 scope link", "route add default via 169.254.1.1 dev eth0"),
		}
		if o.IPIP {
			// What calico-node's startup does on an IPIP pool: tunl0 (the
			// kernel's fallback device, made if the namespace lacks it)
			// up, with the first address of the node's block.
			steps = append(steps, tunnel(ctx, r, nd.ns, block.Addr(), tunnelMode))
		}
		if err := errors.Join(steps...); err != nil {
			return nil, fmt.Errorf("handmade lab: %s: %w", name, err)
		}
		put(datastore.KindNode, name, datastore.Node{Name: name, IPv4Address: addr, Uplinks: []datastore.Uplink{{Interface: "eth0", Address: addr}}})
		put(datastore.KindBlockAffinity, fmt.Sprintf("10-244-%d-0-26", i), datastore.BlockAffinity{CIDR: block.String(), Node: name})
		put(datastore.KindWorkload, name+"-wl", datastore.Workload{Name: name + "-wl", Node: name, Interface: hostIf, Addresses: []string{wl.String() + "/32"}})
		m.Nodes = append(m.Nodes, lab.Node{
			Name: name, Netns: nodeRef, Interfaces: []string{"eth0"},
			Workloads: []lab.Workload{{Name: name + "-wl", Netns: wlRef, Interface: "eth0", Address: wl.String()}},
		})
		nodes = append(nodes, nd)
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
		for _, rel := range config.Releases {
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
		// 5. The node agent, inside the node's namespace: under `ip netns
		// exec`, or as its container's init.
		if n.ctr != nil {
			if err := os.WriteFile(filepath.Join(nd, "container"), []byte(n.ctr.id+"\n"), 0o644); err != nil {
				return nil, err
			}
			for _, c := range append([]*container{n.ctr}, n.pods...) {
				if err := rc.start(ctx, c); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := startAgent(r, nd, n.ns.name, n.name, filepath.Join(dir, "datastore"), prog, o.Timing); err != nil {
			return nil, err
		}
	}

	// 6. The manifest: actions are the lab's scripts, run on the host or,
	// in the runc flavour, inside the node's container.
	m.Actions = lab.Actions{
		SetProgramClusterRoutes: "{manifestDir}/set-program-cluster-routes.sh {manifestDir} {felix} {bgp}",
		Upgrade:                 "{manifestDir}/upgrade.sh {manifestDir} {node} {release} {signal}",
		KillBIRD:                "kill -s {signal} $(cat {manifestDir}/nodes/{node}/bird.pid)",
		StartBIRD:               "echo bird-start {recovery} > {manifestDir}/nodes/{node}/ctl",
		Birdc:                   "birdc -s {manifestDir}/nodes/{node}/bird.ctl {command}",
	}
	if rc != nil {
		rexec := "runc --root " + rc.root + " exec " + r.Name("lab-") + "{node} "
		m.Actions.Upgrade = rexec + "bash {manifestDir}/upgrade.sh {manifestDir} {node} {release} {signal}"
		m.Actions.KillBIRD = rexec + `sh -c 'kill -s "$1" "$(cat "$2")"' - {signal} {manifestDir}/nodes/{node}/bird.pid`
		m.Actions.StartBIRD = rexec + `sh -c 'echo bird-start "$1" >"$2"' - {recovery} {manifestDir}/nodes/{node}/ctl`
		m.Actions.Birdc = rexec + "birdc -s {manifestDir}/nodes/{node}/bird.ctl {command}"
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
func startAgent(r *run.Run, nd, nns, node, ds, prog string, timing timing.Model) error {
	cmd := exec.Command("ip", "netns", "exec", nns, "bash", filepath.Join(filepath.Dir(filepath.Dir(nd)), "agent.sh"), nd, node, ds, prog)
	cmd.Env = append(os.Environ(),
		env.Set(env.ProgrammerStartupDelay, timing.ProgrammerStartupDelay.String()),
		env.Set(env.ProgrammerResyncDelayPerRoute, timing.ProgrammerResyncPerRoute.String()))
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

// where is a network namespace as the lab's script reaches it: by its
// `ip netns` name, or by the PID of a process inside it (a container's
// init, as kind's scripts reach a node through `docker inspect`).
type where struct {
	name string
	pid  int
}

// path is the namespace's file, to open it.
func (w where) path() string {
	if w.name != "" {
		return "/var/run/netns/" + w.name
	}
	return fmt.Sprintf("/proc/%d/ns/net", w.pid)
}

// in is argv run inside the namespace.
func (w where) in(argv ...string) []string {
	if w.name != "" {
		return append([]string{"ip", "netns", "exec", w.name}, argv...)
	}
	return append([]string{"nsenter", "-t", fmt.Sprint(w.pid), "-n"}, argv...)
}

// target is the namespace as `ip link set ... netns X` takes it.
func (w where) target() string {
	if w.name != "" {
		return w.name
	}
	return fmt.Sprint(w.pid)
}

// command runs one command.
func command(ctx context.Context, argv ...string) error {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ip runs one ip command.
func ip(ctx context.Context, args ...string) error {
	return command(ctx, append([]string{"ip"}, args...)...)
}

// ipIn runs ip commands (each a space-separated line) in a namespace.
func ipIn(ctx context.Context, w where, lines ...string) error {
	for _, l := range lines {
		if err := command(ctx, w.in(append([]string{"ip"}, strings.Fields(l)...)...)...); err != nil {
			return err
		}
	}
	return nil
}

func sysctl(ctx context.Context, w where, kv ...string) error {
	return command(ctx, w.in(append([]string{"sysctl", "-qw"}, kv...)...)...)
}

// tunnel brings up tunl0 in a node's namespace with addr. The kernel's: the
// fallback device the ipip module gives every namespace, made by hand where
// the kernel gives it only to the host's (fb_tunnels_only_for_init_net).
// Otherwise the eBPF emulation (topo.EmulateTunl0), its programs detached
// when r closes.
func tunnel(ctx context.Context, r *run.Run, w where, addr netip.Addr, mode string) error {
	if mode != topo.TunnelKernel {
		t, err := topo.EmulateTunl0(w.path(), addr, mode)
		if err != nil {
			return err
		}
		r.Defer("lab tunl0 programs in "+w.path(), t.Close)
		return sysctl(ctx, w, "net.ipv4.conf.tunl0.rp_filter=0")
	}
	if err := command(ctx, w.in("ip", "link", "show", "tunl0")...); err != nil {
		if err := ipIn(ctx, w, "link add name tunl0 type ipip"); err != nil {
			return noIPIP{err}
		}
	}
	return errors.Join(
		ipIn(ctx, w, "link set tunl0 mtu 1480", "addr add "+addr.String()+"/32 dev tunl0", "link set tunl0 up"),
		sysctl(ctx, w, "net.ipv4.conf.tunl0.rp_filter=0"))
}

// noIPIP is the error of a kernel without ipip; it names the missing
// feature (testenv.FeatureError), so a test skips rather than fails.
type noIPIP struct{ err error }

func (e noIPIP) Error() string {
	return fmt.Sprintf("no tunl0 (a kernel without ipip: run the IPIP lab under ci/vm/run): %v", e.err)
}
func (e noIPIP) Unwrap() error          { return e.err }
func (e noIPIP) MissingFeature() string { return "ipip" }

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
