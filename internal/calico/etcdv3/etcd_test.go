package etcdv3

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/topo"
)

// TestEtcdFromANodeNamespace holds the datastore claim against a real etcd:
// the member listens on a control-plane namespace's underlay address; a
// client in another namespace (a node's), reaching it over TCP through the
// link between them as Felix would, reads back exactly the keys the writer
// stored, and its watch sees a live programClusterRoutes change and a block
// affinity's removal made in the cluster model.
func TestEtcdFromANodeNamespace(t *testing.T) {
	r := testenv.NewRun(t) // skips without root
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// 1. A control-plane namespace and a node namespace joined by a veth,
	// 10.250.0.1 and 10.250.0.2.
	cp := testenv.NetNSIn(t, r, "etcdcp")
	node := testenv.NetNSIn(t, r, "etcdnode")
	cp.Veth(t, "cp0", "node0", "10.250.0.1/24")
	peer, err := cp.Handle.LinkByName("node0")
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Handle.LinkSetNsFd(peer, int(node.NS.Fd())); err != nil {
		t.Fatalf("move node0 into %s: %v", node.Name, err)
	}
	n0, err := node.Handle.LinkByName("node0")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := netlink.ParseAddr("10.250.0.2/24")
	if err := node.Handle.AddrAdd(n0, addr); err != nil {
		t.Fatal(err)
	}
	if err := node.Handle.LinkSetUp(n0); err != nil {
		t.Fatal(err)
	}

	// 2. The model.
	store, err := openStore(r)
	if err != nil {
		t.Fatal(err)
	}
	c := smallCluster()
	for _, p := range c.Pools {
		must(t, store.Put(datastore.KindIPPool, p.Name, p))
	}
	for _, n := range c.Nodes {
		must(t, store.Put(datastore.KindNode, n.Name, n))
	}
	for i, b := range c.Blocks {
		must(t, store.Put(datastore.KindBlockAffinity, []string{"b0", "b1"}[i], b))
	}
	for _, w := range c.Workloads {
		must(t, store.Put(datastore.KindWorkload, w.Name, w))
	}
	for _, p := range c.Peers {
		must(t, store.Put(datastore.KindBGPPeer, p.Name, p))
	}
	must(t, store.Put(datastore.KindFelixConfiguration, datastore.SingletonName, c.Felix))
	must(t, store.Put(datastore.KindBGPConfiguration, datastore.SingletonName, c.BGP))

	// 3. The member in the control-plane namespace, following the model.
	syncs := make(chan SyncReport, 16)
	srv, err := Serve(ctx, r, store, ServerOptions{NetNS: cp.NS.Path(), Listen: mustAddrPort("10.250.0.1:2379")},
		Options{Release: config.R333, Created: created}, func(rep SyncReport, err error) {
			if err != nil {
				t.Errorf("sync: %v", err)
			}
			select {
			case syncs <- rep:
			default:
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Endpoint != "http://10.250.0.1:2379" {
		t.Errorf("Endpoint = %q; want http://10.250.0.1:2379", srv.Endpoint)
	}
	// Negative control: the address is the control-plane namespace's, not
	// this process's. An etcd request from here (no route through the veth)
	// gets no answer, so what the node reads below came over its link. (A
	// bare TCP connect proves nothing: some hosts' gateways accept any.)
	if err := getWithin(ctx, nil, srv.Endpoint, 2*time.Second); err == nil {
		t.Fatal("the member answered from the test's own namespace; it is not confined to the control-plane namespace")
	}

	first := <-syncs
	// Guard: the first sync wrote everything; the rest of the test means
	// nothing on an empty datastore.
	if len(first.Put) < 10 {
		t.Fatalf("first sync wrote %d keys (%v); want every pool, node, block, config and workload", len(first.Put), first.Put)
	}

	// 4. A client in the node namespace, over TCP to the underlay address.
	felix := nodeClient(t, node.NS, srv.Endpoint)
	defer felix.Close()
	got, err := felix.Get(ctx, "/calico/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("get from %s: %v", node.Name, err)
	}
	m, err := Map(c, Options{Release: config.R333, Created: created})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, kv := range m.KVs {
		want[kv.Key] = string(kv.Value)
	}
	stored := make([]KV, 0, len(got.Kvs))
	for _, kv := range got.Kvs {
		stored = append(stored, KV{Key: string(kv.Key), Value: kv.Value})
	}
	checkKVs(t, stored, want)

	// 5. A live change: the node-side watch sees programClusterRoutes
	// change in FelixConfiguration, and a removed affinity's key go.
	watch := felix.Watch(ctx, "/calico/", clientv3.WithPrefix(), clientv3.WithRev(got.Header.Revision+1))
	c.Felix.ProgramClusterRoutes = string(config.EnabledIPIPOnly)
	must(t, store.Put(datastore.KindFelixConfiguration, datastore.SingletonName, c.Felix))
	felixKey := ResourceKey(PluralFelixConfiguration, "", datastore.SingletonName)
	waitEvent(t, watch, func(e *clientv3.Event) bool {
		return e.Type == clientv3.EventTypePut && string(e.Kv.Key) == felixKey &&
			strings.Contains(string(e.Kv.Value), `"programClusterRoutes":"EnabledIPIPOnly"`)
	}, "FelixConfiguration programClusterRoutes EnabledIPIPOnly")

	must(t, store.Delete(datastore.KindBlockAffinity, "b0")) // node-2's 10.65.0.4/30
	gone := BlockAffinityKey("node-2", mustPrefix("10.65.0.4/30"))
	waitEvent(t, watch, func(e *clientv3.Event) bool {
		return e.Type == clientv3.EventTypeDelete && string(e.Kv.Key) == gone
	}, "delete of "+gone)
}

// getWithin makes one etcd request to endpoint from netns (nil: this
// process's namespace) and returns its error.
func getWithin(ctx context.Context, netns ns.NetNS, endpoint string, limit time.Duration) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: limit, DialOptions: dialIn(netns), Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	_, err = cli.Get(ctx, "/calico/")
	return err
}

// dialIn makes the client's connections inside netns (nil: here).
func dialIn(netns ns.NetNS) []grpc.DialOption {
	if netns == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		var c net.Conn
		err := netns.Do(func(ns.NetNS) error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	})}
}

// nodeClient is an etcd client whose connections are made inside netns, as
// a process of that namespace makes them.
func nodeClient(t *testing.T, netns ns.NetNS, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 10 * time.Second,
		DialOptions: dialIn(netns),
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client in netns: %v", err)
	}
	return cli
}

// waitEvent reads the watch until an event matches, for at most 20s.
func waitEvent(t *testing.T, wc clientv3.WatchChan, match func(*clientv3.Event) bool, what string) {
	t.Helper()
	limit := time.After(20 * time.Second)
	var seen []string
	for {
		select {
		case resp, ok := <-wc:
			if !ok {
				t.Fatalf("watch closed before %s (saw %v)", what, seen)
			}
			if err := resp.Err(); err != nil {
				t.Fatalf("watch: %v", err)
			}
			for _, e := range resp.Events {
				if match(e) {
					return
				}
				seen = append(seen, e.Type.String()+" "+string(e.Kv.Key))
			}
		case <-limit:
			t.Fatalf("no watch event for %s within 20s (saw %v)", what, seen)
		}
	}
}

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDatastoreOnTheUnderlay holds reachability the way a real cluster has
// it: on a topology birdcage builds (three nodes on one segment), the
// member runs on a control-plane host plugged into the underlay, and every
// node reads Calico's keys from its own namespace over the underlay.
func TestDatastoreOnTheUnderlay(t *testing.T) {
	r := testenv.NewRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	net, err := topo.Build(ctx, topo.NoEncap(3, 0), r, topo.Options{})
	if err != nil {
		testenv.SkipIfMissing(t, err, "topology noencap")
		t.Fatal(err)
	}
	cp, err := net.AddControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	store, err := openStore(r)
	if err != nil {
		t.Fatal(err)
	}
	must(t, store.Put(datastore.KindIPPool, "noencap", datastore.IPPool{Name: "noencap", CIDR: "10.244.0.0/16", IPIPMode: datastore.EncapNever}))
	for _, nd := range net.Nodes {
		must(t, store.Put(datastore.KindNode, nd.Name, datastore.Node{Name: nd.Name, IPv4Address: nd.Spec.Interfaces[0].Address}))
	}
	srv, err := Serve(ctx, r, store, ServerOptions{NetNS: cp.Path, Listen: netip.AddrPortFrom(cp.Addr, DefaultClientPort)},
		Options{Release: config.R333}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane %s on switch %s: %s", cp.NetNS, cp.Switch, srv.Endpoint)
	for _, nd := range net.Nodes {
		cli := nodeClient(t, nd.NS, srv.Endpoint)
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := cli.Get(rctx, ResourceKey(PluralNode, "", nd.Name))
		rcancel()
		cli.Close()
		if err != nil || len(resp.Kvs) != 1 {
			t.Errorf("%s: read its Node from %s: %v (%d keys)", nd.Name, srv.Endpoint, err, countKVs(resp))
			continue
		}
		if !strings.Contains(string(resp.Kvs[0].Value), `"ipv4Address":"`+nd.Spec.Interfaces[0].Address+`"`) {
			t.Errorf("%s: its Node in etcd is %s; want its BGP address %s", nd.Name, resp.Kvs[0].Value, nd.Spec.Interfaces[0].Address)
		}
	}
}

func countKVs(resp *clientv3.GetResponse) int {
	if resp == nil {
		return 0
	}
	return len(resp.Kvs)
}

// openStore is a cluster model in a temp dir of the run: removed when the
// run closes, after the writer following it has stopped.
func openStore(r *run.Run) (*datastore.DirStore, error) {
	dir, err := r.TempDir("model")
	if err != nil {
		return nil, err
	}
	return datastore.OpenDir(dir)
}
