package harness

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/birdcage/birdcage/dataplane/caliconode"
	"github.com/birdcage/birdcage/dataplane/supervisor"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/etcdv3"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/report/results"
)

// A node's flavour is what runs on it.
const (
	// FlavourModel is birdcage's own model of Calico: the route
	// programmer, the confd-like renderer and upstream BIRD (the default,
	// what CI runs).
	FlavourModel = "model"
	// FlavourCalico is Calico's own Felix, confd and BIRD (the
	// projectcalico BIRD 1.6.8 fork), from a directory laid out like the
	// calico/node image (Options.Calico, Options.NodeCalico), reading
	// Calico's etcdv3 datastore (internal/calico/etcdv3).
	FlavourCalico = "calico"
)

// Flavour is the node's flavour: FlavourModel or FlavourCalico.
func (n *Node) Flavour() string {
	if n.Calico != nil {
		return FlavourCalico
	}
	return FlavourModel
}

// calicoSource is the source node name runs from: its NodeCalico entry,
// else Options.Calico; "" runs the model.
func calicoSource(opts Options, node string) string {
	if s, ok := opts.NodeCalico[node]; ok {
		return s
	}
	return opts.Calico
}

// checkNodeCalico rejects a NodeCalico entry for a node the topology
// lacks, and opens every named source once.
func checkNodeCalico(opts Options, nodes []string) (map[string]caliconode.Source, error) {
	for name := range opts.NodeCalico {
		if !slices.Contains(nodes, name) {
			return nil, fmt.Errorf("Options.NodeCalico: no node %q in the topology (nodes: %s)", name, strings.Join(nodes, ", "))
		}
	}
	srcs := map[string]caliconode.Source{}
	for _, n := range nodes {
		dir := calicoSource(opts, n)
		if dir == "" {
			continue
		}
		if _, ok := srcs[dir]; ok {
			continue
		}
		s, err := caliconode.OpenSource(dir)
		if err != nil {
			return nil, err
		}
		srcs[dir] = s
	}
	return srcs, nil
}

// calicoEnv is the environment of every calico node: the datastore's, and
// what the etcd manifest's calico-node container sets
// (manifests/calico-etcd.yaml), plus one departure:
// FELIX_DebugSkipCTLBCleanup, so Felix never detaches connect-time
// load-balancer programs from the host's cgroup, which every namespace
// of this machine shares (and which a Felix built without cgo would panic
// on).
func calicoEnv(srv *etcdv3.Server) []string {
	env := append([]string(nil), srv.Env()...)
	return append(env,
		"CALICO_NETWORKING_BACKEND=bird",
		"CLUSTER_TYPE=k8s,bgp",
		"CALICO_DISABLE_FILE_LOGGING=true",
		"FELIX_DEFAULTENDPOINTTOHOSTACTION=ACCEPT",
		"FELIX_IPV6SUPPORT=false",
		"FELIX_HEALTHENABLED=true",
		"FELIX_HEALTHHOST=127.0.0.1",
		"FELIX_LOGSEVERITYSCREEN=info",
		"FELIX_USAGEREPORTINGENABLED=false",
		"BGP_LOGSEVERITYSCREEN=info",
		"FELIX_DebugSkipCTLBCleanup=true",
	)
}

// startControlPlane plugs a control-plane host into the underlay
// (topo.AddControlPlane: beside the first node, reached by every node as
// it reaches its peers) and serves Calico's datastore there, following
// c.Store.
func (c *Cluster) startControlPlane(ctx context.Context) (*etcdv3.Server, error) {
	cp, err := c.Net.AddControlPlane()
	if err != nil {
		return nil, err
	}
	srv, err := etcdv3.Serve(ctx, c.Run, c.Store, etcdv3.ServerOptions{NetNS: cp.Path, Listen: netip.AddrPortFrom(cp.Addr, etcdv3.DefaultClientPort)},
		etcdv3.Options{Release: c.opts.Release, Created: time.Now()}, func(_ etcdv3.SyncReport, err error) {
			if err != nil {
				c.log.Warn("etcd writer", "err", err)
			}
		})
	if err != nil {
		return nil, err
	}
	c.log.Info("Calico's datastore", "endpoint", srv.Endpoint, "segment", cp.Switch)
	return srv, nil
}

// waitCalicoNode waits until the node's BIRD has every BGP session
// Established and Felix reports ready (calico-node's -felix-ready and
// -bird-ready, without their 10 s period).
func waitCalicoNode(ctx context.Context, n *Node) error {
	var last string
	err := poll.Until(ctx, 50*time.Millisecond, func() bool {
		ps, err := n.Calico.BIRD().Protocols(ctx)
		if err != nil {
			last = "BIRD: " + err.Error()
			return false
		}
		var pending []string
		bgp := 0
		for _, p := range ps {
			if p.Proto != "BGP" {
				continue
			}
			bgp++
			if !p.Established() {
				pending = append(pending, p.Name+": "+p.State+" "+p.Info)
			}
		}
		if bgp == 0 || len(pending) > 0 {
			sort.Strings(pending)
			last = fmt.Sprintf("BIRD: %d BGP sessions, not Established: %s", bgp, strings.Join(pending, "; "))
			return false
		}
		ready, err := n.Calico.FelixReady(ctx)
		if err != nil || !ready {
			last = fmt.Sprintf("Felix not ready (%v)", err)
			return false
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("node %s (calico %s): %s (logs in %s): %w", n.Name, n.Calico.Source().Dir, last, n.Calico.LogDir(), err)
	}
	return nil
}

// readCalicoVersions asks the node's pod what its binaries are and takes
// the node's release from Calico's version.
func (n *Node) readCalicoVersions(ctx context.Context) error {
	v, err := n.Calico.Versions(ctx)
	if err != nil {
		return fmt.Errorf("node %s: component versions: %w", n.Name, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calicoVersions = v
	n.release = calicoRelease(v.Calico, n.release)
	return nil
}

// CalicoVersions are the versions the node's Calico binaries reported when
// its pod last started; zero on a model node.
func (n *Node) CalicoVersions() caliconode.Versions {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calicoVersions
}

// calicoRelease is the release a calico source's version names (v3.33.0-…
// is 3.33), else def.
func calicoRelease(version string, def config.Release) config.Release {
	v := strings.TrimPrefix(version, "v")
	f := strings.SplitN(v, ".", 3)
	if len(f) < 2 {
		return def
	}
	if r, err := config.ParseRelease(f[0] + "." + f[1]); err == nil {
		return r
	}
	return def
}

// flavours is each node's flavour and component versions, for results.
func (c *Cluster) flavours() (map[string]string, map[string]map[string]string) {
	fl := map[string]string{}
	comps := map[string]map[string]string{}
	for _, n := range c.nodes {
		fl[n.Name] = n.Flavour()
		if n.Calico != nil {
			v := n.CalicoVersions()
			comps[n.Name] = map[string]string{"calico": v.Calico, "bird": v.BIRD, "source": n.Calico.Source().Dir}
			continue
		}
		r := n.BIRD.Release()
		comps[n.Name] = map[string]string{"programmer": "birdcage model", "bird": string(r.Name) + " (" + r.Package + ")"}
	}
	return fl, comps
}

// diagnoseCalico copies a calico node's logs (one per service, and
// runc's), its BIRD's protocols and routes and its rendered bird.cfg.
func (c *Cluster) diagnoseCalico(ctx context.Context, n *Node, dir string, write func(string, any)) {
	p := n.Name + "."
	for _, f := range append(append([]string(nil), caliconode.Services...), "container") {
		copyFile(filepath.Join(n.Calico.LogDir(), f+".log"), filepath.Join(dir, p+"calico-"+f+".log"))
	}
	if !n.Calico.Running() {
		return
	}
	for cmd, file := range map[string]string{"show protocols all": "bird-protocols.txt", "show route all": "bird-routes.txt"} {
		if reply, err := n.Calico.BIRD().Run(ctx, cmd); err == nil {
			write(p+file, reply.Text())
		} else {
			write(p+file, "birdc "+cmd+": "+err.Error())
		}
	}
	if out, err := n.Calico.Exec(ctx, "cat", "/etc/calico/confd/config/bird.cfg"); err == nil {
		write(p+"bird.cfg", out)
	}
}

// upgradeCalico replaces a calico node's pod, as a Calico upgrade does:
// every process of the old image gets o.Signal (SIGKILL: all die at once,
// BIRD's routes persist; SIGTERM: each service stops on its own terms),
// then the new image's pod starts, BIRD with -R as its run script does.
// It returns once the new Felix reports ready.
func (c *Cluster) upgradeCalico(ctx context.Context, n *Node, to config.Release, o UpgradeOptions) (results.Event, error) {
	src := n.Calico.Source()
	if o.Calico != "" {
		var err error
		if src, err = caliconode.OpenSource(o.Calico); err != nil {
			return results.Event{}, fmt.Errorf("upgrade %s: field Calico: %w", n.Name, err)
		}
	}
	if o.BIRD != "" || o.Programmer != "" {
		return results.Event{}, fmt.Errorf("upgrade %s: fields BIRD and Programmer are the model's; a calico node's BIRD and Felix come from its image (field Calico)", n.Name)
	}
	e := c.Mark(fmt.Sprintf("UpgradeNode(%s→%s)", n.Name, to))
	fail := func(err error) (results.Event, error) { return e, fmt.Errorf("upgrade %s: %w", n.Name, err) }
	if err := n.Calico.Stop(ctx, o.Signal); err != nil {
		return fail(fmt.Errorf("stop the old pod: %w", err))
	}
	c.Mark(fmt.Sprintf("BIRD(%s) exited", n.Name))
	if err := n.Calico.Start(ctx, src, nil); err != nil {
		return fail(fmt.Errorf("start the new pod: %w", err))
	}
	if err := n.readCalicoVersions(ctx); err != nil {
		return fail(err)
	}
	if err := poll.Until(ctx, 20*time.Millisecond, func() bool { ok, _ := n.Calico.FelixReady(ctx); return ok }); err != nil {
		return fail(fmt.Errorf("new Felix not ready (log %s): %w", filepath.Join(n.Calico.LogDir(), "felix.log"), err))
	}
	c.Mark(fmt.Sprintf("UpgradeNode(%s) programmer synced", n.Name))
	return e, nil
}

// errCalicoNode is an action's answer on a calico node it does not drive
// (yet): those act on the model's processes.
func errCalicoNode(node, action string) error {
	return fmt.Errorf("%s(%s): %s runs the calico flavour (Calico's own pod); %s drives the model's processes only (UpgradeNode replaces a calico pod)", action, node, node, action)
}

// programmerRestarts are the model programmer's restarts; none on a
// calico node.
func (n *Node) programmerRestarts() []supervisor.Restart {
	if n.Programmer == nil {
		return nil
	}
	return n.Programmer.Restarts()
}
