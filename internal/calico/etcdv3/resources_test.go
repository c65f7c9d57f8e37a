package etcdv3

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// These tests hold the pure mapping from birdcage's cluster model to the
// keys and JSON Calico's etcdv3 datastore holds, each against literals read
// off Calico's source at the commit named beside it.

var created = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// smallCluster has one IPIP pool of /30 blocks (short literals), two nodes
// (one a route reflector with its own AS), a workload, a ToR peer and both
// configuration singletons.
func smallCluster() *datastore.Cluster {
	mesh := false
	return &datastore.Cluster{
		Pools:     []datastore.IPPool{{Name: "ipip", CIDR: "10.65.0.0/16", IPIPMode: "Always", BlockSize: 30}},
		Nodes:     []datastore.Node{{Name: "node-1", IPv4Address: "10.0.1.11/24"}, {Name: "node-2", IPv4Address: "10.0.1.12/24", ASNumber: 64513, RouteReflector: true}},
		Blocks:    []datastore.BlockAffinity{{CIDR: "10.65.0.4/30", Node: "node-2"}, {CIDR: "10.65.0.0/30", Node: "node-1"}},
		Workloads: []datastore.Workload{{Name: "wl-1", Node: "node-1", Interface: "cali1", Addresses: []string{"10.65.0.2/32"}}},
		Peers:     []datastore.BGPPeer{{Name: "tor-a", Node: "node-1", PeerIP: "10.0.1.1", ASNumber: 65001}},
		Felix:     datastore.FelixConfiguration{ProgramClusterRoutes: "Enabled", DeviceRouteProtocol: 80, RouteRefreshInterval: "90s"},
		BGP:       datastore.BGPConfiguration{ProgramClusterRoutes: "Disabled", NodeToNodeMeshEnabled: &mesh, ASNumber: 64512},
	}
}

// checkKVs compares the mapping with want, key by key; both sides must be
// valid JSON (etcd holds what Calico's json.Unmarshal reads).
func checkKVs(t *testing.T, got []KV, want map[string]string) {
	t.Helper()
	if len(got) == 0 {
		t.Fatal("the mapping wrote no keys at all")
	}
	seen := map[string]bool{}
	for _, kv := range got {
		seen[kv.Key] = true
		if !json.Valid(kv.Value) {
			t.Errorf("%s: value is not JSON: %s", kv.Key, kv.Value)
		}
		w, ok := want[kv.Key]
		if !ok {
			t.Errorf("unexpected key %s = %s", kv.Key, kv.Value)
			continue
		}
		if string(kv.Value) != w {
			t.Errorf("%s:\n got %s\nwant %s", kv.Key, kv.Value, w)
		}
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("missing key %s", k)
		}
	}
}

// TestKeys holds the key layout (libcalico-go/lib/backend/model, the same
// at 3cdeae8f7ace, de60d98e97a7 and 6609dea54713): resources under
// /calico/resources/v3/projectcalico.org/<plural>/[<ns>/]<name>, IPAM
// CIDRs with "-" for "/".
func TestKeys(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{ResourceKey(PluralIPPool, "", "default-ipv4-ippool"), "/calico/resources/v3/projectcalico.org/ippools/default-ipv4-ippool"},
		{ResourceKey(PluralWorkloadEndpoint, "default", "node--1-k8s-wl-eth0"), "/calico/resources/v3/projectcalico.org/workloadendpoints/default/node--1-k8s-wl-eth0"},
		{BlockKey(netip.MustParsePrefix("10.65.0.64/26")), "/calico/ipam/v2/assignment/ipv4/block/10.65.0.64-26"},
		{BlockKey(netip.MustParsePrefix("10.65.0.70/26")), "/calico/ipam/v2/assignment/ipv4/block/10.65.0.64-26"}, // masked, as BlockKey.defaultPath does
		{BlockKey(netip.MustParsePrefix("fd00:65::/122")), "/calico/ipam/v2/assignment/ipv6/block/fd00:65::-122"},
		{BlockAffinityKey("node-2", netip.MustParsePrefix("10.65.0.64/26")), "/calico/ipam/v2/host/node-2/ipv4/block/10.65.0.64-26"},
		{HandleKey("ipip-tunnel-addr-node-2"), "/calico/ipam/v2/handle/ipip-tunnel-addr-node-2"},
	} {
		if c.got != c.want {
			t.Errorf("key %q, want %q", c.got, c.want)
		}
	}
}

// TestWorkloadEndpointName holds Calico's endpoint naming
// (libcalico-go/lib/names/workloadendpoint.go @ 6609dea54713): dashes in
// each segment doubled, segments joined by one dash.
func TestWorkloadEndpointName(t *testing.T) {
	got, err := WorkloadEndpointName("node-1", "probe-a")
	if err != nil || got != "node--1-k8s-probe--a-eth0" {
		t.Errorf("WorkloadEndpointName(node-1, probe-a) = %q, %v; want node--1-k8s-probe--a-eth0", got, err)
	}
	if _, err := WorkloadEndpointName("node-1", "-bad"); err == nil {
		t.Error("a pod name beginning with '-' was accepted; Calico refuses it (escapeDashes)")
	}
}

// TestMapLiteral holds the mapping to Calico's own keys and JSON: every key
// and value a small cluster becomes under release 3.33, spelled out. The
// shapes were read in Calico's source at release-v3.33 @ 6609dea54713
// (libcalico-go/lib/backend/model: resource.go, block.go,
// block_affinity.go, ipam_handle.go; api/pkg/apis/projectcalico/v3;
// libcalico-go/lib/apis/internalapi; clientv3/ippool.go defaults;
// cni-plugin ipam_plugin.go attributes; node/pkg/allocateip handles).
func TestMapLiteral(t *testing.T) {
	m, err := Map(smallCluster(), Options{Release: config.R333, Created: created})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/calico/ipam/v2/assignment/ipv4/block/10.65.0.0-30":                                                      `{"cidr":"10.65.0.0/30","affinity":"host:node-1","affinity_claim_time":"2026-12-06T12:00:00Z","allocations":[0,null,1,null],"unallocated":[1,3],"attributes":[{"handle_id":"ipip-tunnel-addr-node-1","secondary":{"node":"node-1","type":"ipipTunnelAddress"}},{"handle_id":"k8s-pod-network.b9568883b7b8e8f35658be2f3f856c6e1f2cb7550c40094c728b1f110618c67a","secondary":{"namespace":"default","node":"node-1","pod":"wl-1","timestamp":"2026-12-06 12:00:00 +0000 UTC"}}],"sequenceNumber":1796558400000000002,"sequenceNumberForAllocation":{"0":1796558400000000000,"2":1796558400000000001},"deleted":false}`,
		"/calico/ipam/v2/assignment/ipv4/block/10.65.0.4-30":                                                      `{"cidr":"10.65.0.4/30","affinity":"host:node-2","affinity_claim_time":"2026-12-06T12:00:00Z","allocations":[0,null,null,null],"unallocated":[1,2,3],"attributes":[{"handle_id":"ipip-tunnel-addr-node-2","secondary":{"node":"node-2","type":"ipipTunnelAddress"}}],"sequenceNumber":1796558400000000001,"sequenceNumberForAllocation":{"0":1796558400000000000},"deleted":false}`,
		"/calico/ipam/v2/handle/ipip-tunnel-addr-node-1":                                                          `{"block":{"10.65.0.0/30":1},"deleted":false}`,
		"/calico/ipam/v2/handle/ipip-tunnel-addr-node-2":                                                          `{"block":{"10.65.0.4/30":1},"deleted":false}`,
		"/calico/ipam/v2/handle/k8s-pod-network.b9568883b7b8e8f35658be2f3f856c6e1f2cb7550c40094c728b1f110618c67a": `{"block":{"10.65.0.0/30":1},"deleted":false}`,
		"/calico/ipam/v2/host/node-1/ipv4/block/10.65.0.0-30":                                                     `{"state":"confirmed","deleted":false}`,
		"/calico/ipam/v2/host/node-2/ipv4/block/10.65.0.4-30":                                                     `{"state":"confirmed","deleted":false}`,
		"/calico/resources/v3/projectcalico.org/bgpconfigurations/default":                                        `{"kind":"BGPConfiguration","apiVersion":"projectcalico.org/v3","metadata":{"name":"default","uid":"ddbf3c9c-647a-8f12-16f2-13539ff697bf","creationTimestamp":"2026-12-06T12:00:00Z"},"spec":{"nodeToNodeMeshEnabled":false,"asNumber":64512,"programClusterRoutes":"Disabled"}}`,
		"/calico/resources/v3/projectcalico.org/bgppeers/tor-a":                                                   `{"kind":"BGPPeer","apiVersion":"projectcalico.org/v3","metadata":{"name":"tor-a","uid":"bb327143-f201-2942-bd5d-7454e2bca8b8","creationTimestamp":"2026-12-06T12:00:00Z"},"spec":{"node":"node-1","peerIP":"10.0.1.1","asNumber":65001}}`,
		"/calico/resources/v3/projectcalico.org/clusterinformations/default":                                      `{"kind":"ClusterInformation","apiVersion":"projectcalico.org/v3","metadata":{"name":"default","uid":"8d9c0cff-6706-c7a0-1d84-b510177043a9","creationTimestamp":"2026-12-06T12:00:00Z"},"spec":{"clusterGUID":"1d0c3c54c5b1ba4573d33cc919b27c50","clusterType":"k8s,bgp","datastoreReady":true}}`,
		"/calico/resources/v3/projectcalico.org/felixconfigurations/default":                                      `{"kind":"FelixConfiguration","apiVersion":"projectcalico.org/v3","metadata":{"name":"default","uid":"7213f9b7-74da-bc94-9a05-a4c28a32d38b","creationTimestamp":"2026-12-06T12:00:00Z"},"spec":{"routeRefreshInterval":"1m30s","logSeverityScreen":"Info","reportingInterval":"0s","deviceRouteProtocol":80,"programClusterRoutes":"Enabled"}}`,
		"/calico/resources/v3/projectcalico.org/ippools/ipip":                                                     `{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"ipip","uid":"ff5965af-b75f-2b22-f8f1-cbd42aa6a7be","creationTimestamp":"2026-12-06T12:00:00Z"},"spec":{"cidr":"10.65.0.0/16","vxlanMode":"Never","ipipMode":"Always","blockSize":30,"nodeSelector":"all()","allowedUses":["Workload","Tunnel"],"assignmentMode":"Automatic"}}`,
		"/calico/resources/v3/projectcalico.org/nodes/node-1":                                                     `{"kind":"Node","apiVersion":"projectcalico.org/v3","metadata":{"name":"node-1","uid":"be3908d3-ebef-aaef-1efd-e59bc90775f1","creationTimestamp":"2026-12-06T12:00:00Z"},"spec":{"bgp":{"ipv4Address":"10.0.1.11/24","ipv4IPIPTunnelAddr":"10.65.0.0"}}}`,
		"/calico/resources/v3/projectcalico.org/nodes/node-2":                                                     `{"kind":"Node","apiVersion":"projectcalico.org/v3","metadata":{"name":"node-2","uid":"1795d5c7-7566-ee30-b1ff-9dc85e5a834a","creationTimestamp":"2026-12-06T12:00:00Z","labels":{"route-reflector":"true"}},"spec":{"bgp":{"asNumber":64513,"ipv4Address":"10.0.1.12/24","ipv4IPIPTunnelAddr":"10.65.0.4","routeReflectorClusterID":"224.0.0.1"}}}`,
		"/calico/resources/v3/projectcalico.org/profiles/kns.default":                                             `{"kind":"Profile","apiVersion":"projectcalico.org/v3","metadata":{"name":"kns.default","uid":"b757df8f-8374-db07-e6b5-9b39ee623f17","creationTimestamp":"2026-12-06T12:00:00Z"},"spec":{"ingress":[{"action":"Allow"}],"egress":[{"action":"Allow"}]}}`,
		"/calico/resources/v3/projectcalico.org/workloadendpoints/default/node--1-k8s-wl--1-eth0":                 `{"kind":"WorkloadEndpoint","apiVersion":"projectcalico.org/v3","metadata":{"name":"node--1-k8s-wl--1-eth0","namespace":"default","uid":"4d8d625f-1649-508c-e00f-5f30e5005eb8","creationTimestamp":"2026-12-06T12:00:00Z","labels":{"projectcalico.org/namespace":"default","projectcalico.org/orchestrator":"k8s"}},"spec":{"orchestrator":"k8s","node":"node-1","containerID":"b9568883b7b8e8f35658be2f3f856c6e1f2cb7550c40094c728b1f110618c67a","pod":"wl-1","endpoint":"eth0","ipNetworks":["10.65.0.2/32"],"profiles":["kns.default"],"interfaceName":"cali1"}}`,
	}
	checkKVs(t, m.KVs, want)
	if len(m.Dropped) != 0 {
		t.Errorf("3.33 has both programClusterRoutes fields, yet the mapping dropped %q", m.Dropped)
	}
}

// TestMapRelease331 holds the per-release differences at 3.31
// (release-v3.31 @ 3cdeae8f7ace): BGPConfiguration has no
// programClusterRoutes (api/pkg/apis/projectcalico/v3/bgpconfig.go), so the
// model's value is not written and the mapping says so; an AllocationBlock
// has no affinity_claim_time (model/block.go). FelixConfiguration has its
// two-valued field there, so it is written.
func TestMapRelease331(t *testing.T) {
	m, err := Map(smallCluster(), Options{Release: config.R331, Created: created})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]string{}
	for _, kv := range m.KVs {
		byKey[kv.Key] = string(kv.Value)
	}
	for key, want := range map[string]string{
		"/calico/resources/v3/projectcalico.org/bgpconfigurations/default":   `{"kind":"BGPConfiguration","apiVersion":"projectcalico.org/v3","metadata":{"name":"default","uid":"ddbf3c9c-647a-8f12-16f2-13539ff697bf","creationTimestamp":"2026-12-06T12:00:00Z"},"spec":{"nodeToNodeMeshEnabled":false,"asNumber":64512}}`,
		"/calico/resources/v3/projectcalico.org/felixconfigurations/default": `{"kind":"FelixConfiguration","apiVersion":"projectcalico.org/v3","metadata":{"name":"default","uid":"7213f9b7-74da-bc94-9a05-a4c28a32d38b","creationTimestamp":"2026-12-06T12:00:00Z"},"spec":{"routeRefreshInterval":"1m30s","logSeverityScreen":"Info","reportingInterval":"0s","deviceRouteProtocol":80,"programClusterRoutes":"Enabled"}}`,
		"/calico/ipam/v2/assignment/ipv4/block/10.65.0.4-30":                 `{"cidr":"10.65.0.4/30","affinity":"host:node-2","allocations":[0,null,null,null],"unallocated":[1,2,3],"attributes":[{"handle_id":"ipip-tunnel-addr-node-2","secondary":{"node":"node-2","type":"ipipTunnelAddress"}}],"sequenceNumber":1796558400000000001,"sequenceNumberForAllocation":{"0":1796558400000000000},"deleted":false}`,
	} {
		if byKey[key] != want {
			t.Errorf("3.31 %s:\n got %s\nwant %s", key, byKey[key], want)
		}
	}
	if len(m.Dropped) != 1 || !strings.Contains(m.Dropped[0], `BGPConfiguration.programClusterRoutes "Disabled": Calico 3.31 has no such field`) {
		t.Errorf("Dropped = %q; want the one BGPConfiguration.programClusterRoutes note", m.Dropped)
	}
	// Positive control: at 3.32 the same value is written
	// (bgpconfig.go @ de60d98e97a7 has the field).
	m32, err := Map(smallCluster(), Options{Release: config.R332, Created: created})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range m32.KVs {
		if kv.Key == ResourceKey(PluralBGPConfiguration, "", "default") && !strings.Contains(string(kv.Value), `"programClusterRoutes":"Disabled"`) {
			t.Errorf("3.32 BGPConfiguration lacks programClusterRoutes: %s", kv.Value)
		}
	}
}

// TestMapUnsetAndDefaults: an empty configuration leaves programClusterRoutes
// unset (the components' release defaults apply; FelixConfiguration holds
// only what calico-node's startup adds, startup.go ensureDefaultConfig @
// 6609dea54713), a pool without modes or block size
// is stored as clientv3 defaults it (ipipMode/vxlanMode Never, blockSize
// 26; clientv3/ippool.go @ 6609dea54713), and a no-encap pool gives a node
// no IPIP tunnel address.
func TestMapUnsetAndDefaults(t *testing.T) {
	c := &datastore.Cluster{
		Pools:  []datastore.IPPool{{Name: "noencap", CIDR: "10.66.0.0/16"}},
		Nodes:  []datastore.Node{{Name: "node-1", IPv4Address: "10.0.1.11/24"}},
		Blocks: []datastore.BlockAffinity{{CIDR: "10.66.0.0/26", Node: "node-1"}},
	}
	m, err := Map(c, Options{Release: config.R333, Created: created})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]string{}
	for _, kv := range m.KVs {
		byKey[kv.Key] = string(kv.Value)
	}
	for key, want := range map[string]string{
		ResourceKey(PluralIPPool, "", "noencap"):                          `"spec":{"cidr":"10.66.0.0/16","vxlanMode":"Never","ipipMode":"Never","blockSize":26,"nodeSelector":"all()","allowedUses":["Workload","Tunnel"],"assignmentMode":"Automatic"}`,
		ResourceKey(PluralNode, "", "node-1"):                             `"spec":{"bgp":{"ipv4Address":"10.0.1.11/24"}}`,
		ResourceKey(PluralFelixConfiguration, "", "default"):              `"spec":{"logSeverityScreen":"Info","reportingInterval":"0s"}}`,
		ResourceKey(PluralBGPConfiguration, "", "default"):                `"spec":{}`,
		BlockAffinityKey("node-1", netip.MustParsePrefix("10.66.0.0/26")): `{"state":"confirmed","deleted":false}`,
	} {
		if !strings.Contains(byKey[key], want) {
			t.Errorf("%s:\n got %s\nwant it to contain %s", key, byKey[key], want)
		}
	}
	if strings.Contains(byKey[BlockKey(netip.MustParsePrefix("10.66.0.0/26"))], "ipip-tunnel-addr") {
		t.Error("a no-encap pool's block holds an IPIP tunnel address")
	}
}

// TestMapErrors: what Calico could not store fails, naming the document
// and the field.
func TestMapErrors(t *testing.T) {
	for _, c := range []struct {
		edit func(*datastore.Cluster)
		want string
	}{
		{func(c *datastore.Cluster) { c.Pools[0].CIDR = "10.65.0.0/33" }, `ippool "ipip": cidr "10.65.0.0/33"`},
		{func(c *datastore.Cluster) { c.Blocks[0].CIDR = "nope" }, `block affinity "nope" (node "node-2"): cidr`},
		{func(c *datastore.Cluster) { c.Workloads[0].Addresses = []string{"10.65.0.2"} }, `workload "wl-1": address "10.65.0.2"`},
		{func(c *datastore.Cluster) { c.Felix.RouteRefreshInterval = "90" }, `felixconfiguration: routeRefreshInterval "90"`},
		{func(c *datastore.Cluster) { c.Workloads[0].Addresses = []string{"10.65.0.0/32"} }, `block 10.65.0.0/30: address ordinal 0 is assigned twice`},
	} {
		cl := smallCluster()
		c.edit(cl)
		_, err := Map(cl, Options{Release: config.R333, Created: created})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v; want one containing %q", err, c.want)
		}
	}
	if _, err := Map(smallCluster(), Options{Release: config.R333}); err == nil || !strings.Contains(err.Error(), "Created") {
		t.Errorf("zero Created: error %v; want one naming Options.Created", err)
	}
	if _, err := Map(smallCluster(), Options{Release: "3.30"}); err == nil || !strings.Contains(err.Error(), "Release") {
		t.Errorf("unknown release: error %v; want one naming Options.Release", err)
	}
}
