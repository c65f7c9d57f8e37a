package etcdv3

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/internal/testenv"
)

// TestRealConfdRendersFromTheDatastore holds the datastore against real
// confd: rendering once for node-1 from the etcd this package writes, it
// peers with node-2 at node-2's BGP address (Nodes, BGPConfiguration's AS
// and mesh), and its kernel filter follows BGPConfiguration's
// programClusterRoutes: the release default lets BIRD program the no-encap
// pool's routes, Disabled — a live change in the cluster model — does not.
func TestRealConfdRendersFromTheDatastore(t *testing.T) {
	src, confd := calicoConfd(t)
	release := calicoRelease(t, calicoFelix(t))
	r := testenv.NewRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cp, node := cpAndNode(t, r, "confd")
	store, err := openStore(r)
	if err != nil {
		t.Fatal(err)
	}
	twoNodeNoEncap(t, store)
	must(t, store.Put(datastore.KindBGPConfiguration, datastore.SingletonName, datastore.BGPConfiguration{}))
	srv, err := Serve(ctx, r, store, ServerOptions{NetNS: cp.NS.Path(), Listen: netip.MustParseAddrPort("10.250.0.1:2379")},
		Options{Release: release}, func(_ SyncReport, err error) {
			if err != nil {
				t.Errorf("sync: %v", err)
			}
		})
	if err != nil {
		t.Fatal(err)
	}

	// 1. The release default (3.33: EnabledNoEncapOnly): node-2 is a mesh
	// peer at its BGP address, node-1's own block is aggregated (its
	// affinity key), and the kernel filter accepts the no-encap pool.
	out := renderOnce(t, ctx, node.NS, src, confd, srv, "default")
	expect(t, out, "bird.cfg", "protocol bgp Mesh_10_250_0_3 from bgp_template {\n  neighbor 10.250.0.3 as 64512;", true)
	expect(t, out, "bird.cfg", "router id 10.250.0.2;", true)
	expect(t, out, "bird.cfg", "neighbor 10.250.0.2 ", false) // not itself
	expect(t, out, "bird_aggr.cfg", "10.65.0.0/26", true)
	expect(t, out, "bird_aggr.cfg", "10.65.0.64/26", false) // node-2's block is not node-1's
	kernelFilter := func(out map[string]string) string {
		f := out["bird_ipam.cfg"]
		if i := strings.Index(f, "filter calico_kernel_programming"); i >= 0 {
			return f[i:]
		}
		return ""
	}
	if kf := kernelFilter(out); !strings.Contains(kf, "if (net ~ 10.65.0.0/16) then { accept; }") {
		t.Errorf("default BGPConfiguration: kernel filter does not accept the no-encap pool:\n%s", kf)
	}

	// 2. The live change: programClusterRoutes Disabled in the model. 3.31
	// has no such field: the writer drops it and BIRD keeps the routes.
	if !release.Field(config.BIRD).Exists {
		t.Logf("Calico %s: BGPConfiguration has no programClusterRoutes; the live change does not apply", release)
		return
	}
	must(t, store.Put(datastore.KindBGPConfiguration, datastore.SingletonName, datastore.BGPConfiguration{ProgramClusterRoutes: string(config.Disabled)}))
	key := ResourceKey(PluralBGPConfiguration, "", datastore.SingletonName)
	waitKeyContains(t, ctx, srv, key, `"programClusterRoutes":"Disabled"`)
	out = renderOnce(t, ctx, node.NS, src, confd, srv, "disabled")
	if kf := kernelFilter(out); !strings.Contains(kf, "if (net ~ 10.65.0.0/16) then { reject; }") {
		t.Errorf("BGPConfiguration programClusterRoutes Disabled: kernel filter does not reject the no-encap pool:\n%s", kf)
	}
	expect(t, out, "bird.cfg", "neighbor 10.250.0.3 as 64512;", true) // the mesh is unchanged
}

// expect checks that confd's file name contains (or not) want.
func expect(t *testing.T, out map[string]string, name, want string, contains bool) {
	t.Helper()
	if strings.Contains(out[name], want) != contains {
		t.Errorf("%s: contains %q = %v, want %v; the file:\n%s", name, want, !contains, contains, out[name])
	}
}

// waitKeyContains waits (10s at most) until etcd's value at key contains
// want: the writer follows the model asynchronously.
func waitKeyContains(t *testing.T, ctx context.Context, srv *Server, key, want string) {
	t.Helper()
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var last string
	if err := poll.Until(wctx, 50*time.Millisecond, func() bool {
		resp, err := cli.Get(wctx, key)
		if err != nil || len(resp.Kvs) == 0 {
			return false
		}
		last = string(resp.Kvs[0].Value)
		return strings.Contains(last, want)
	}); err != nil {
		t.Fatalf("etcd %s does not contain %s within 10s (last %s)", key, want, last)
	}
}

// calicoConfd returns $BIRDCAGE_CALICO and the command that renders once.
func calicoConfd(t *testing.T) (string, []string) {
	felix := calicoFelix(t)
	dir := os.Getenv(CalicoEnv)
	confdir := filepath.Join(dir, "etc/calico/confd")
	if strings.HasSuffix(felix[0], "/calico") { // 3.33 (node/pkg/node/command.go)
		return dir, []string{felix[0], "component", "confd", "--run-once", "--confdir", confdir}
	}
	return dir, []string{felix[0], "-confd", "-confd-run-once", "-confd-confdir", confdir} // 3.31, 3.32
}

// renderOnce runs confd once for node-1 in netns, in a mount namespace
// whose /etc, /run and /var/lib are overlays (confd writes the absolute
// /etc/calico/confd/config), and returns the files it wrote there.
func renderOnce(t *testing.T, ctx context.Context, netns ns.NetNS, src string, confd []string, srv *Server, tag string) map[string]string {
	t.Helper()
	tmp := t.TempDir()
	script := `set -e
for d in /etc /run /var/lib; do
	u="$OVL/$(echo $d | tr / _)"; mkdir -p "$u/upper" "$u/work"
	mount -t overlay overlay -o "lowerdir=$d,upperdir=$u/upper,workdir=$u/work" "$d"
done
mkdir -p /etc/calico/confd/config /var/run/calico
exec "$@"`
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "confd"}, confd...)...)
	cmd.Env = append(os.Environ(), srv.Env()...)
	cmd.Env = append(cmd.Env, "OVL="+tmp, "NODENAME=node-1",
		"PATH="+filepath.Join(src, "bin")+":"+filepath.Join(src, "usr/bin")+":"+os.Getenv("PATH"))
	var outb strings.Builder
	cmd.Stdout, cmd.Stderr = &outb, &outb
	if err := netns.Do(func(ns.NetNS) error { return cmd.Start() }); err != nil {
		t.Fatalf("start confd: %v", err)
	}
	err := cmd.Wait()
	logPath := filepath.Join(srv.Dir, "confd-"+tag+".log")
	_ = os.WriteFile(logPath, []byte(outb.String()), 0o644)
	if err != nil {
		t.Fatalf("confd (%s): %v; its output ends:\n%s", strings.Join(confd, " "), err, tail(outb.String(), 30))
	}
	files := map[string]string{}
	dir := filepath.Join(tmp, "_etc", "upper", "calico", "confd", "config")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil {
			files[e.Name()] = string(b)
		}
	}
	if len(files) == 0 {
		t.Fatalf("confd wrote nothing under /etc/calico/confd/config; its output ends:\n%s", tail(outb.String(), 30))
	}
	return files
}
