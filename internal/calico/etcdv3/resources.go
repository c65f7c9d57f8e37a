package etcdv3

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// Options say what the written datastore stands for.
type Options struct {
	// Release is the Calico API the datastore holds (the newest release in
	// the cluster: an upgrade installs its API before any node moves). It
	// decides which fields exist: BGPConfiguration.programClusterRoutes
	// only from 3.32, a block's affinity_claim_time only from 3.32.
	Release config.Release
	// Created stamps every resource's creationTimestamp, each block's
	// affinity claim time and the base of its sequence numbers. Fixed for a
	// writer's life, so that the same cluster maps to the same bytes and a
	// sync with nothing changed writes nothing.
	Created time.Time
	// ClusterGUID is ClusterInformation's clusterGUID; empty derives one
	// from Created.
	ClusterGUID string
}

// KV is one etcd key and the value Calico stores under it.
type KV struct {
	Key   string
	Value []byte
}

// Mapping is a cluster as Calico's datastore holds it.
type Mapping struct {
	KVs []KV // sorted by key
	// Dropped names model fields the release has no place for (a
	// BGPConfiguration programClusterRoutes under 3.31), so a caller can say
	// so instead of the field vanishing silently.
	Dropped []string
}

// Calico's identifiers birdcage's workloads take, as a Kubernetes cluster's
// pods would have them.
const (
	APIVersion = "projectcalico.org/v3"
	// WorkloadNamespace is the namespace every probe workload is a pod of.
	WorkloadNamespace = "default"
	// WorkloadProfile allows all traffic to and from the workloads, as the
	// per-namespace profile Calico's kube-controllers writes for a
	// namespace without policy. Without a profile Felix drops a workload's
	// traffic.
	WorkloadProfile    = "kns." + WorkloadNamespace
	workloadEndpoint   = "eth0"
	orchestrator       = "k8s"
	podNetworkName     = "k8s-pod-network" // CNI network name: pod handles are <this>.<containerID>
	routeReflectorID   = "224.0.0.1"       // Calico docs' example routeReflectorClusterID
	routeReflectorKey  = "route-reflector"
	ipipTunnelAttrType = "ipipTunnelAddress" // model/block.go IPAMBlockAttributeTypeIPIP
	// clusterType is CLUSTER_TYPE of Calico's etcd manifest
	// (manifests/calico-etcd.yaml), which startup stores in
	// ClusterInformation.
	clusterType = "k8s,bgp"
)

// The JSON shapes below are Calico's, written out by hand because Calico's
// Go packages cannot be imported. Field names and order follow
// api/pkg/apis/projectcalico/v3 (IPPool, FelixConfiguration,
// BGPConfiguration, BGPPeer, Profile, ClusterInformation),
// libcalico-go/lib/apis/internalapi (Node, WorkloadEndpoint; 3.31's
// libcalico-go/lib/apis/v3 has the same JSON) and
// libcalico-go/lib/backend/model (block.go, block_affinity.go,
// ipam_handle.go), read at release-v3.31 @ 3cdeae8f7ace, release-v3.32 @
// de60d98e97a7 and release-v3.33 @ 6609dea54713; a field that differs
// between them says so.

type resource[S any] struct {
	Kind       string     `json:"kind"`
	APIVersion string     `json:"apiVersion"`
	Metadata   objectMeta `json:"metadata"`
	Spec       S          `json:"spec"`
}

// objectMeta is metav1.ObjectMeta in its field order, with what
// libcalico-go's clientv3 sets on create (uid, creationTimestamp).
type objectMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	CreationTimestamp string            `json:"creationTimestamp,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
}

type ipPoolSpec struct {
	CIDR           string   `json:"cidr"`
	VXLANMode      string   `json:"vxlanMode,omitempty"`
	IPIPMode       string   `json:"ipipMode,omitempty"`
	Disabled       bool     `json:"disabled,omitempty"`
	BlockSize      int      `json:"blockSize,omitempty"`
	NodeSelector   string   `json:"nodeSelector,omitempty"`
	AllowedUses    []string `json:"allowedUses,omitempty"`
	AssignmentMode string   `json:"assignmentMode,omitempty"` // *AssignmentMode; 3.31–3.33
}

type nodeSpec struct {
	BGP *nodeBGPSpec `json:"bgp,omitempty"`
}

type nodeBGPSpec struct {
	ASNumber                int    `json:"asNumber,omitempty"`
	IPv4Address             string `json:"ipv4Address,omitempty"`
	IPv6Address             string `json:"ipv6Address,omitempty"`
	IPv4IPIPTunnelAddr      string `json:"ipv4IPIPTunnelAddr,omitempty"`
	RouteReflectorClusterID string `json:"routeReflectorClusterID,omitempty"`
}

type felixConfigurationSpec struct {
	RouteRefreshInterval string  `json:"routeRefreshInterval,omitempty"` // metav1.Duration: Go's Duration.String()
	LogSeverityScreen    string  `json:"logSeverityScreen,omitempty"`
	ReportingInterval    string  `json:"reportingInterval,omitempty"`
	DeviceRouteProtocol  *int    `json:"deviceRouteProtocol,omitempty"`
	ProgramClusterRoutes *string `json:"programClusterRoutes,omitempty"`
}

type bgpConfigurationSpec struct {
	NodeToNodeMeshEnabled *bool   `json:"nodeToNodeMeshEnabled,omitempty"`
	ASNumber              int     `json:"asNumber,omitempty"`
	ProgramClusterRoutes  *string `json:"programClusterRoutes,omitempty"` // from 3.32 only
}

type bgpPeerSpec struct {
	Node     string `json:"node,omitempty"`
	PeerIP   string `json:"peerIP,omitempty"`
	ASNumber int    `json:"asNumber,omitempty"`
}

type profileSpec struct {
	Ingress []rule `json:"ingress,omitempty"`
	Egress  []rule `json:"egress,omitempty"`
}

type rule struct {
	Action string `json:"action"`
}

type clusterInformationSpec struct {
	ClusterGUID    string `json:"clusterGUID,omitempty"`
	ClusterType    string `json:"clusterType,omitempty"`
	DatastoreReady *bool  `json:"datastoreReady,omitempty"`
}

type workloadEndpointSpec struct {
	Orchestrator  string   `json:"orchestrator,omitempty"`
	Node          string   `json:"node,omitempty"`
	ContainerID   string   `json:"containerID,omitempty"`
	Pod           string   `json:"pod,omitempty"`
	Endpoint      string   `json:"endpoint,omitempty"`
	IPNetworks    []string `json:"ipNetworks,omitempty"`
	Profiles      []string `json:"profiles,omitempty"`
	InterfaceName string   `json:"interfaceName,omitempty"`
}

// allocationBlock is model.AllocationBlock. affinity_claim_time exists
// from 3.32 (absent at 3cdeae8f7ace). Attributes are written with both
// handle_id and secondary set, which 3.31's AllocationAttribute (no
// omitempty) and 3.33's (omitempty) marshal alike.
type allocationBlock struct {
	CIDR                        string                `json:"cidr"`
	Affinity                    *string               `json:"affinity"`
	AffinityClaimTime           string                `json:"affinity_claim_time,omitempty"`
	Allocations                 []*int                `json:"allocations"`
	Unallocated                 []int                 `json:"unallocated"`
	Attributes                  []allocationAttribute `json:"attributes"`
	SequenceNumber              uint64                `json:"sequenceNumber"`
	SequenceNumberForAllocation map[string]uint64     `json:"sequenceNumberForAllocation"`
	Deleted                     bool                  `json:"deleted"`
}

type allocationAttribute struct {
	HandleID  string            `json:"handle_id"`
	Secondary map[string]string `json:"secondary"`
}

// blockAffinity is model.BlockAffinity: a confirmed host affinity.
type blockAffinity struct {
	State   string `json:"state"`
	Deleted bool   `json:"deleted"`
}

// ipamHandle is model.IPAMHandle: how many addresses a handle holds in
// each block.
type ipamHandle struct {
	Block   map[string]int `json:"block"`
	Deleted bool           `json:"deleted"`
}

// Map turns the cluster model into Calico's keys and values. It fails on
// what Calico could not store (an unparsable CIDR or address), naming the
// document and field.
func Map(c *datastore.Cluster, o Options) (*Mapping, error) {
	if _, err := config.ParseRelease(string(o.Release)); err != nil {
		return nil, fmt.Errorf("etcdv3 options: Release: %w", err)
	}
	if o.Created.IsZero() {
		return nil, errors.New("etcdv3 options: Created is zero: want the time the datastore's resources were created (NewWriter uses now)")
	}
	m := &mapper{o: o, out: &Mapping{}}
	if err := m.run(c); err != nil {
		return nil, err
	}
	sort.Slice(m.out.KVs, func(i, j int) bool { return m.out.KVs[i].Key < m.out.KVs[j].Key })
	return m.out, nil
}

type mapper struct {
	o   Options
	out *Mapping
}

func (m *mapper) put(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %s: %v", key, err)) // only our own types
	}
	m.out.KVs = append(m.out.KVs, KV{Key: key, Value: b})
}

func (m *mapper) meta(kind, namespace, name string) objectMeta {
	return objectMeta{
		Name:              name,
		Namespace:         namespace,
		UID:               uid(kind, namespace, name),
		CreationTimestamp: m.created(),
	}
}

func (m *mapper) created() string { return m.o.Created.UTC().Format(time.RFC3339) }

func resourceOf[S any](kind string, meta objectMeta, spec S) resource[S] {
	return resource[S]{Kind: kind, APIVersion: APIVersion, Metadata: meta, Spec: spec}
}

func (m *mapper) run(c *datastore.Cluster) error {
	pools := map[netip.Prefix]datastore.IPPool{}
	for _, p := range c.Pools {
		cidr, err := netip.ParsePrefix(p.CIDR)
		if err != nil {
			return fmt.Errorf("ippool %q: cidr %q: %w", p.Name, p.CIDR, err)
		}
		pools[cidr.Masked()] = p
		m.put(ResourceKey(PluralIPPool, "", p.Name), resourceOf("IPPool", m.meta("IPPool", "", p.Name), poolSpec(p, cidr)))
	}

	blocks, err := m.blocks(c, pools)
	if err != nil {
		return err
	}

	for _, n := range c.Nodes {
		spec := nodeSpec{BGP: &nodeBGPSpec{
			ASNumber:           n.ASNumber,
			IPv4Address:        n.IPv4Address,
			IPv6Address:        n.IPv6Address,
			IPv4IPIPTunnelAddr: blocks.tunnel[n.Name],
		}}
		meta := m.meta("Node", "", n.Name)
		if n.RouteReflector {
			spec.BGP.RouteReflectorClusterID = routeReflectorID
			meta.Labels = map[string]string{routeReflectorKey: "true"}
		}
		m.put(ResourceKey(PluralNode, "", n.Name), resourceOf("Node", meta, spec))
	}

	for _, p := range c.Peers {
		m.put(ResourceKey(PluralBGPPeer, "", p.Name), resourceOf("BGPPeer", m.meta("BGPPeer", "", p.Name),
			bgpPeerSpec{Node: p.Node, PeerIP: p.PeerIP, ASNumber: p.ASNumber}))
	}

	felix, err := m.felixSpec(c.Felix)
	if err != nil {
		return err
	}
	m.put(ResourceKey(PluralFelixConfiguration, "", datastore.SingletonName),
		resourceOf("FelixConfiguration", m.meta("FelixConfiguration", "", datastore.SingletonName), felix))
	m.put(ResourceKey(PluralBGPConfiguration, "", datastore.SingletonName),
		resourceOf("BGPConfiguration", m.meta("BGPConfiguration", "", datastore.SingletonName), m.bgpSpec(c.BGP)))

	ready := true
	guid := m.o.ClusterGUID
	if guid == "" {
		// clientv3 ensureClusterInformation: the hex of a UUID's 16 bytes.
		guid = strings.ReplaceAll(uid("ClusterInformation", "", m.created()), "-", "")
	}
	m.put(ResourceKey(PluralClusterInformation, "", datastore.SingletonName),
		resourceOf("ClusterInformation", m.meta("ClusterInformation", "", datastore.SingletonName),
			clusterInformationSpec{ClusterGUID: guid, ClusterType: clusterType, DatastoreReady: &ready}))

	allow := []rule{{Action: "Allow"}}
	m.put(ResourceKey(PluralProfile, "", WorkloadProfile),
		resourceOf("Profile", m.meta("Profile", "", WorkloadProfile), profileSpec{Ingress: allow, Egress: allow}))

	for _, w := range c.Workloads {
		name, err := WorkloadEndpointName(w.Node, w.Name)
		if err != nil {
			return fmt.Errorf("workload %q: %w", w.Name, err)
		}
		meta := m.meta("WorkloadEndpoint", WorkloadNamespace, name)
		// The labels Calico's CNI plugin puts on every pod's endpoint.
		meta.Labels = map[string]string{
			"projectcalico.org/namespace":    WorkloadNamespace,
			"projectcalico.org/orchestrator": orchestrator,
		}
		m.put(ResourceKey(PluralWorkloadEndpoint, WorkloadNamespace, name), resourceOf("WorkloadEndpoint", meta, workloadEndpointSpec{
			Orchestrator:  orchestrator,
			Node:          w.Node,
			ContainerID:   containerID(w.Name),
			Pod:           w.Name,
			Endpoint:      workloadEndpoint,
			IPNetworks:    w.Addresses,
			Profiles:      []string{WorkloadProfile},
			InterfaceName: w.Interface,
		}))
	}
	return nil
}

// poolSpec is the pool as libcalico-go's clientv3 stores it after
// defaulting (clientv3/ippool.go validateAndSetDefaults, the same at the
// three releases): unset modes are Never, the block size 26 (v4) or 122
// (v6), the node selector all(), allowed uses Workload and Tunnel,
// assignment mode Automatic.
func poolSpec(p datastore.IPPool, cidr netip.Prefix) ipPoolSpec {
	s := ipPoolSpec{
		CIDR:           cidr.Masked().String(),
		VXLANMode:      orDefault(p.VXLANMode, datastore.EncapNever),
		IPIPMode:       orDefault(p.IPIPMode, datastore.EncapNever),
		Disabled:       p.Disabled,
		BlockSize:      p.BlockSize,
		NodeSelector:   "all()",
		AllowedUses:    []string{"Workload", "Tunnel"},
		AssignmentMode: "Automatic",
	}
	if s.BlockSize == 0 {
		s.BlockSize = datastore.DefaultBlockSizeV4
		if cidr.Addr().Is6() {
			s.BlockSize = datastore.DefaultBlockSizeV6
		}
	}
	return s
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func (m *mapper) felixSpec(f datastore.FelixConfiguration) (felixConfigurationSpec, error) {
	// What calico-node's startup leaves in the default FelixConfiguration
	// (node/pkg/lifecycle/startup/startup.go ensureDefaultConfig, the same at
	// 3cdeae8f7ace and 6609dea54713): it adds both when missing, so writing
	// them keeps a later write of ours from taking them away again, which
	// Felix would see as a configuration change.
	s := felixConfigurationSpec{LogSeverityScreen: "Info", ReportingInterval: "0s"}
	if f.RouteRefreshInterval != "" {
		d, err := time.ParseDuration(f.RouteRefreshInterval)
		if err != nil {
			return s, fmt.Errorf("felixconfiguration: routeRefreshInterval %q: want a Go duration such as 90s: %w", f.RouteRefreshInterval, err)
		}
		s.RouteRefreshInterval = d.String()
	}
	if f.DeviceRouteProtocol != 0 {
		p := f.DeviceRouteProtocol
		s.DeviceRouteProtocol = &p
	}
	s.ProgramClusterRoutes = m.programClusterRoutes("FelixConfiguration", config.Programmer, f.ProgramClusterRoutes)
	return s, nil
}

func (m *mapper) bgpSpec(b datastore.BGPConfiguration) bgpConfigurationSpec {
	s := bgpConfigurationSpec{NodeToNodeMeshEnabled: b.NodeToNodeMeshEnabled, ASNumber: b.ASNumber}
	s.ProgramClusterRoutes = m.programClusterRoutes("BGPConfiguration", config.BIRD, b.ProgramClusterRoutes)
	// bgpEnabled and kernelMetric are birdcage knobs with no field in
	// BGPConfiguration: Calico says "no BIRD" with
	// CALICO_NETWORKING_BACKEND=none on the node, and the fork's kernel
	// metric is fixed.
	return s
}

// programClusterRoutes is the raw value as stored, where the release has
// the field; unknown values pass through (the components resolve them, as
// internal/calico/config.Resolve models).
func (m *mapper) programClusterRoutes(resource string, c config.Component, raw string) *string {
	if raw == "" {
		return nil
	}
	if !m.o.Release.Field(c).Exists {
		m.out.Dropped = append(m.out.Dropped, fmt.Sprintf("%s.programClusterRoutes %q: Calico %s has no such field; not written", resource, raw, m.o.Release))
		return nil
	}
	return &raw
}

// blockState is what the IPAM keys decided that the Node resources need.
type blockState struct {
	tunnel map[string]string // node → its IPIP tunnel address
}

type allocation struct {
	ordinal int
	handle  string
	attrs   map[string]string
}

// blocks writes each affine block, its affinity and the handles of its
// allocations as Calico IPAM leaves them after the node's tunnel address
// and its pods were assigned: the node's IPIP tunnel address is the first
// address of its first IPIP block (where birdcage's topology puts tunl0's
// address, and the first ordinal Calico's allocator hands out in a fresh
// block), each workload address the ordinal it falls on.
func (m *mapper) blocks(c *datastore.Cluster, pools map[netip.Prefix]datastore.IPPool) (blockState, error) {
	st := blockState{tunnel: map[string]string{}}
	type blk struct {
		cidr   netip.Prefix
		node   string
		allocs []allocation
	}
	var bs []*blk
	for _, a := range c.Blocks {
		p, err := netip.ParsePrefix(a.CIDR)
		if err != nil {
			return st, fmt.Errorf("block affinity %q (node %q): cidr: %w", a.CIDR, a.Node, err)
		}
		bs = append(bs, &blk{cidr: p.Masked(), node: a.Node})
	}
	// Lowest block first, so "first IPIP block" is the same whatever the
	// order documents were read in.
	sort.Slice(bs, func(i, j int) bool { return bs[i].cidr.Addr().Less(bs[j].cidr.Addr()) })
	ipipPool := func(b netip.Prefix) bool {
		for cidr, p := range pools {
			if cidr.Contains(b.Addr()) {
				return p.IsIPIP()
			}
		}
		return false
	}
	for _, b := range bs {
		if _, done := st.tunnel[b.node]; done || !b.cidr.Addr().Is4() || !ipipPool(b.cidr) {
			continue
		}
		st.tunnel[b.node] = b.cidr.Addr().String()
		h := "ipip-tunnel-addr-" + b.node // node/pkg/allocateip generateHandleAndAttributes
		b.allocs = append(b.allocs, allocation{ordinal: 0, handle: h, attrs: map[string]string{"node": b.node, "type": ipipTunnelAttrType}})
	}
	for _, w := range c.Workloads {
		for _, a := range w.Addresses {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				return st, fmt.Errorf("workload %q: address %q: %w", w.Name, a, err)
			}
			for _, b := range bs {
				if !b.cidr.Contains(p.Addr()) {
					continue
				}
				b.allocs = append(b.allocs, allocation{
					ordinal: ordinal(b.cidr, p.Addr()),
					handle:  podNetworkName + "." + containerID(w.Name),
					// cni-plugin's attributes for a pod's address
					// (ipamplugin/ipam_plugin.go: the timestamp is Go's
					// time.Time String of the UTC time).
					attrs: map[string]string{"namespace": WorkloadNamespace, "node": w.Node, "pod": w.Name, "timestamp": m.o.Created.UTC().String()},
				})
				break
			}
		}
	}

	handles := map[string]map[string]int{}
	base := uint64(m.o.Created.UnixNano()) // ipam_block.go newBlock: a new block's sequence starts at the time
	for _, b := range bs {
		size := 1 << (b.cidr.Addr().BitLen() - b.cidr.Bits())
		affinity := "host:" + b.node
		v := allocationBlock{
			CIDR:                        b.cidr.String(),
			Affinity:                    &affinity,
			Allocations:                 make([]*int, size),
			Unallocated:                 []int{},
			Attributes:                  []allocationAttribute{},
			SequenceNumber:              base,
			SequenceNumberForAllocation: map[string]uint64{},
		}
		if m.o.Release != config.R331 {
			v.AffinityClaimTime = m.created()
		}
		for _, a := range b.allocs {
			if v.Allocations[a.ordinal] != nil {
				return st, fmt.Errorf("block %s: address ordinal %d is assigned twice (handle %s)", b.cidr, a.ordinal, a.handle)
			}
			idx := len(v.Attributes)
			v.Allocations[a.ordinal] = &idx
			v.Attributes = append(v.Attributes, allocationAttribute{HandleID: a.handle, Secondary: a.attrs})
			// Each assignment is one write of the block, which bumps the
			// sequence (ipam_block_reader_writer.go updateBlock).
			v.SequenceNumberForAllocation[strconv.Itoa(a.ordinal)] = v.SequenceNumber
			v.SequenceNumber++
			if handles[a.handle] == nil {
				handles[a.handle] = map[string]int{}
			}
			handles[a.handle][b.cidr.String()]++
		}
		for i, a := range v.Allocations {
			if a == nil {
				v.Unallocated = append(v.Unallocated, i)
			}
		}
		m.put(BlockKey(b.cidr), v)
		m.put(BlockAffinityKey(b.node, b.cidr), blockAffinity{State: "confirmed"})
	}
	for h, blocks := range handles {
		m.put(HandleKey(h), ipamHandle{Block: blocks})
	}
	return st, nil
}

// ordinal is a's offset in block b.
func ordinal(b netip.Prefix, a netip.Addr) int {
	x, y := b.Addr().As16(), a.As16()
	n := 0
	for i := 8; i < 16; i++ { // blocks are at most 2^64 addresses; ours far fewer
		n = n<<8 | int(y[i]-x[i])
	}
	return n
}

// WorkloadEndpointName is the endpoint's name as Calico's names package
// builds it for a Kubernetes pod: node, orchestrator, pod and endpoint
// joined by "-", each with its own dashes doubled
// (libcalico-go/lib/names/workloadendpoint.go CalculateWorkloadEndpointName).
func WorkloadEndpointName(node, pod string) (string, error) {
	parts := []string{node, orchestrator, pod, workloadEndpoint}
	for i, p := range parts {
		if p == "" || strings.HasPrefix(p, "-") || strings.HasSuffix(p, "-") {
			return "", fmt.Errorf("workload endpoint name: %q must be non-empty and neither begin nor end with '-'", p)
		}
		parts[i] = strings.ReplaceAll(p, "-", "--")
	}
	return strings.Join(parts, "-"), nil
}

// containerID stands for the pod's sandbox container ID: 64 hex digits,
// stable per workload name.
func containerID(pod string) string {
	s := sha256.Sum256([]byte("birdcage pod " + pod))
	return hex.EncodeToString(s[:])
}

// uid is a stable UUID-shaped identifier (Calico's clientv3 sets a random
// one on create; stable here so a re-sync changes no bytes).
func uid(kind, namespace, name string) string {
	s := sha256.Sum256([]byte(kind + "/" + namespace + "/" + name))
	h := hex.EncodeToString(s[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// equalValue reports whether two stored values are the same bytes.
func equalValue(a, b []byte) bool { return bytes.Equal(a, b) }
