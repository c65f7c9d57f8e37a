package etcdv3

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/testenv"
)

// TestRealTunnelAllocatorKeepsTheWrittenAddress holds the IPAM half of the
// mapping against calico-node's own tunnel-address allocator, which the
// image runs once at start (rc.local) and which releases and reassigns a
// tunnel address whose IPAM allocation does not carry the node's name and
// type ipipTunnelAddress (node/pkg/allocateip/allocateip.go @ 6609dea54713;
// it does not check the handle): run against the etcd this package
// writes, it must change nothing — no key under /calico/ is written or
// removed. (With the type attribute misspelt, it rewrote the block, the
// handle and the Node: the check can fail.)
func TestRealTunnelAllocatorKeepsTheWrittenAddress(t *testing.T) {
	felix := calicoFelix(t)
	allocate := []string{felix[0], "component", "node", "allocate-tunnel-addrs", "--run-once"} // 3.33 rc.local
	if !strings.HasSuffix(felix[0], "/calico") {
		allocate = []string{felix[0], "-allocate-tunnel-addrs", "-allocate-tunnel-addrs-run-once"} // 3.31, 3.32
	}
	r := testenv.NewRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, node := cpAndNode(t, r, "alloc")

	store, err := openStore(r)
	if err != nil {
		t.Fatal(err)
	}
	must(t, store.Put(datastore.KindIPPool, "ipip", datastore.IPPool{Name: "ipip", CIDR: "10.66.0.0/16", IPIPMode: datastore.EncapAlways}))
	must(t, store.Put(datastore.KindNode, "node-1", datastore.Node{Name: "node-1", IPv4Address: "10.250.0.2/24"}))
	must(t, store.Put(datastore.KindNode, "node-2", datastore.Node{Name: "node-2", IPv4Address: "10.250.0.3/24"}))
	must(t, store.Put(datastore.KindBlockAffinity, "b-local", datastore.BlockAffinity{CIDR: "10.66.0.0/26", Node: "node-1"}))
	must(t, store.Put(datastore.KindBlockAffinity, "b-remote", datastore.BlockAffinity{CIDR: "10.66.0.64/26", Node: "node-2"}))
	must(t, store.Put(datastore.KindWorkload, "wl-1", datastore.Workload{Name: "wl-1", Node: "node-1", Interface: "cali1", Addresses: []string{"10.66.0.1/32"}}))
	srv, err := Serve(ctx, r, store, ServerOptions{NetNS: cp.NS.Path(), Listen: netip.MustParseAddrPort("10.250.0.1:2379")},
		Options{Release: calicoRelease(t, felix)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	before, err := cli.Get(ctx, "/calico/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	// Guard: node-1's tunnel address is in the datastore to be kept.
	if !strings.Contains(valueOf(before, ResourceKey(PluralNode, "", "node-1")), `"ipv4IPIPTunnelAddr":"10.66.0.0"`) {
		t.Fatalf("node-1 has no tunnel address in etcd: %s", valueOf(before, ResourceKey(PluralNode, "", "node-1")))
	}

	cmd := exec.CommandContext(ctx, allocate[0], allocate[1:]...)
	cmd.Env = append(os.Environ(), srv.Env()...)
	cmd.Env = append(cmd.Env, "NODENAME=node-1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := node.NS.Do(func(ns.NetNS) error { return cmd.Run() }); err != nil {
		t.Fatalf("%s: %v; output ends:\n%s", strings.Join(allocate, " "), err, tail(out.String(), 30))
	}
	after, err := cli.Get(ctx, "/calico/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if after.Header.Revision != before.Header.Revision {
		changes, _ := cli.Get(ctx, "/calico/", clientv3.WithPrefix(), clientv3.WithMinModRev(before.Header.Revision+1))
		for _, kv := range changes.Kvs {
			t.Errorf("the allocator rewrote %s:\n was %s\n now %s", kv.Key, valueOf(before, string(kv.Key)), kv.Value)
		}
		t.Errorf("etcd revision %d → %d: the allocator changed the datastore; its output ends:\n%s", before.Header.Revision, after.Header.Revision, tail(out.String(), 30))
	}
	t.Logf("allocator output ends:\n%s", tail(out.String(), 8))
}

func valueOf(resp *clientv3.GetResponse, key string) string {
	for _, kv := range resp.Kvs {
		if string(kv.Key) == key {
			return string(kv.Value)
		}
	}
	return ""
}

// TestRealStartupKeepsTheWrittenModel holds the mapping against
// calico-node's startup (what the image's rc.local runs first, with the
// etcd manifest's environment and IP set to the node's BGP address from the
// model): it may add what it owns — the Node's interfaces and status,
// ClusterInformation's calicoVersion, node.<name> FelixConfiguration,
// IPAMConfiguration, tiers — but must change nothing the model says: the
// Node's BGP and tunnel addresses, the pools (no default pool), the
// default FelixConfiguration and BGPConfiguration, IPAM.
func TestRealStartupKeepsTheWrittenModel(t *testing.T) {
	felix := calicoFelix(t)
	startup := []string{felix[0], "component", "node", "startup"} // 3.33 rc.local
	if !strings.HasSuffix(felix[0], "/calico") {
		startup = []string{felix[0], "-startup"} // 3.31, 3.32
	}
	r := testenv.NewRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, node := cpAndNode(t, r, "start")
	store, err := openStore(r)
	if err != nil {
		t.Fatal(err)
	}
	must(t, store.Put(datastore.KindIPPool, "ipip", datastore.IPPool{Name: "ipip", CIDR: "10.66.0.0/16", IPIPMode: datastore.EncapAlways}))
	must(t, store.Put(datastore.KindNode, "node-1", datastore.Node{Name: "node-1", IPv4Address: "10.250.0.2/24"}))
	must(t, store.Put(datastore.KindNode, "node-2", datastore.Node{Name: "node-2", IPv4Address: "10.250.0.3/24"}))
	must(t, store.Put(datastore.KindBlockAffinity, "b-local", datastore.BlockAffinity{CIDR: "10.66.0.0/26", Node: "node-1"}))
	must(t, store.Put(datastore.KindBlockAffinity, "b-remote", datastore.BlockAffinity{CIDR: "10.66.0.64/26", Node: "node-2"}))
	srv, err := Serve(ctx, r, store, ServerOptions{NetNS: cp.NS.Path(), Listen: netip.MustParseAddrPort("10.250.0.1:2379")},
		Options{Release: calicoRelease(t, felix)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	before, err := cli.Get(ctx, "/calico/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}

	// Startup writes /var/lib/calico/nodename and more: its /etc, /run,
	// /var/lib and /var/log are overlays on temp dirs.
	script := `set -e
for d in /etc /run /var/lib /var/log; do
	u="$OVL/$(echo $d | tr / _)"; mkdir -p "$u/upper" "$u/work"
	mount -t overlay overlay -o "lowerdir=$d,upperdir=$u/upper,workdir=$u/work" "$d"
done
mkdir -p /var/lib/calico /var/run/calico
exec "$@"`
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "startup"}, startup...)...)
	cmd.Env = append(os.Environ(), srv.Env()...)
	// manifests/calico-etcd.yaml's calico-node environment, IP from the model.
	cmd.Env = append(cmd.Env, "OVL="+t.TempDir(), "NODENAME=node-1", "IP=10.250.0.2/24", "CALICO_NETWORKING_BACKEND=bird",
		"CLUSTER_TYPE=k8s,bgp", "CALICO_IPV4POOL_IPIP=Always", "CALICO_IPV4POOL_VXLAN=Never", "FELIX_IPV6SUPPORT=false",
		"CALICO_DISABLE_FILE_LOGGING=true")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := node.NS.Do(func(ns.NetNS) error { return cmd.Run() }); err != nil {
		t.Fatalf("%s: %v; output ends:\n%s", strings.Join(startup, " "), err, tail(out.String(), 30))
	}

	changes, err := cli.Get(ctx, "/calico/", clientv3.WithPrefix(), clientv3.WithMinModRev(before.Header.Revision+1))
	if err != nil {
		t.Fatal(err)
	}
	// Guard: startup did run against this datastore (it always stamps its
	// version on ClusterInformation).
	if !strings.Contains(valueOf(changes, ResourceKey(PluralClusterInformation, "", "default")), `"calicoVersion"`) {
		t.Fatalf("startup left ClusterInformation without its version; did it reach the datastore? output ends:\n%s", tail(out.String(), 30))
	}
	nodeKey := ResourceKey(PluralNode, "", "node-1")
	for _, kv := range changes.Kvs {
		k := string(kv.Key)
		switch {
		case k == nodeKey:
			if !strings.Contains(string(kv.Value), `"bgp":{"ipv4Address":"10.250.0.2/24","ipv4IPIPTunnelAddr":"10.66.0.0"}`) {
				t.Errorf("startup changed node-1's BGP spec:\n was %s\n now %s", valueOf(before, k), kv.Value)
			}
		case valueOf(before, k) == "" && !strings.HasPrefix(k, IPAMPrefix) && !strings.HasPrefix(k, ResourceKey(PluralIPPool, "", "")):
			// A resource of startup's own (node.<name>, IPAMConfiguration, tiers).
		case k == ResourceKey(PluralClusterInformation, "", "default"):
		default:
			t.Errorf("startup changed %s, which the model owns:\n was %s\n now %s", k, valueOf(before, k), kv.Value)
		}
	}
	t.Logf("startup changed or added %d keys", len(changes.Kvs))
}
