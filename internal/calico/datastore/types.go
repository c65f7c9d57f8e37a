package datastore

import "encoding/json"

// Kind names a document kind; it is also the subdirectory the documents of
// that kind live in.
type Kind string

const (
	KindIPPool               Kind = "ippools"
	KindNode                 Kind = "nodes"
	KindBlockAffinity        Kind = "blockaffinities"
	KindWorkload             Kind = "workloads"
	KindBGPPeer              Kind = "bgppeers"
	KindFelixConfiguration   Kind = "felixconfiguration"
	KindBGPConfiguration     Kind = "bgpconfiguration"
	SingletonName                 = "default" // name of the one FelixConfiguration / BGPConfiguration
	EncapAlways                   = "Always"
	EncapCrossSubnet              = "CrossSubnet"
	EncapNever                    = "Never"
	DefaultASNumber          int  = 64512
	DefaultBlockSizeV4       int  = 26
	DefaultBlockSizeV6       int  = 122
	DefaultRouteReflectorKey      = ""
)

// IPPool is a pool of workload addresses and how traffic to it is carried.
type IPPool struct {
	Name      string `json:"name"`
	CIDR      string `json:"cidr"`
	IPIPMode  string `json:"ipipMode"`            // Always | CrossSubnet | Never
	VXLANMode string `json:"vxlanMode,omitempty"` // only Never is modelled
	BlockSize int    `json:"blockSize,omitempty"` // default 26 (v4) / 122 (v6)
	Disabled  bool   `json:"disabled,omitempty"`
}

// IsIPIP reports whether the pool's cluster routes are IPIP-class.
func (p IPPool) IsIPIP() bool {
	return p.IPIPMode == EncapAlways || p.IPIPMode == EncapCrossSubnet
}

// IsNoEncap reports whether the pool is neither IPIP nor VXLAN.
func (p IPPool) IsNoEncap() bool {
	return !p.IsIPIP() && (p.VXLANMode == "" || p.VXLANMode == EncapNever)
}

// Node is a cluster node as both route programmers see it.
type Node struct {
	Name string `json:"name"`
	// IPv4Address is the node's BGP/tunnel address with its subnet, like
	// Calico's spec.bgp.ipv4Address ("10.0.1.11/24").
	IPv4Address string `json:"ipv4Address,omitempty"`
	IPv6Address string `json:"ipv6Address,omitempty"`
	// ASNumber overrides BGPConfiguration.asNumber for this node.
	ASNumber int `json:"asNumber,omitempty"`
	// RouterID defaults to the IPv4 address.
	RouterID string `json:"routerID,omitempty"`
	// Uplinks are the interfaces that carry cluster traffic, each with the
	// gateway on it where the node reaches other nodes through a router
	// (dual-ToR: one per ToR). Empty means "the interface that holds
	// IPv4Address", which is the common single-NIC case.
	Uplinks []Uplink `json:"uplinks,omitempty"`
	// RouteReflector marks a node that reflects iBGP routes to the others.
	RouteReflector bool `json:"routeReflector,omitempty"`
}

// Uplink is one NIC of a node and the next hop beyond it.
type Uplink struct {
	Interface string `json:"interface"`
	Address   string `json:"address,omitempty"` // CIDR on that interface
	Gateway   string `json:"gateway,omitempty"` // next-hop router on that link
}

// BlockAffinity says which node owns an IPAM block.
type BlockAffinity struct {
	CIDR string `json:"cidr"`
	Node string `json:"node"`
}

// Workload is one workload endpoint. Its addresses normally come from its
// node's block; an address from another node's block is "borrowed" and gets
// a /32 (/128) cluster route of its own.
type Workload struct {
	Name      string   `json:"name"`
	Node      string   `json:"node"`
	Interface string   `json:"interface"` // host-side veth, cali...
	Addresses []string `json:"addresses"` // /32 and /128 CIDRs
}

// BGPPeer is an explicit BGP peering (ToRs, external routers). Node empty
// means every node peers with it.
type BGPPeer struct {
	Name     string `json:"name"`
	Node     string `json:"node,omitempty"`
	PeerIP   string `json:"peerIP"`
	ASNumber int    `json:"asNumber"`
	// Plane groups peers of a dual-ToR fabric; informational.
	Plane string `json:"plane,omitempty"`
}

// FelixConfiguration holds the programmer's fields.
type FelixConfiguration struct {
	// ProgramClusterRoutes is the raw field; read it only through
	// internal/calico/config.Resolve.
	ProgramClusterRoutes string `json:"programClusterRoutes,omitempty"`
	DeviceRouteProtocol  int    `json:"deviceRouteProtocol,omitempty"`
	// RouteRefreshInterval is a Go duration string ("90s").
	RouteRefreshInterval string `json:"routeRefreshInterval,omitempty"`
}

// BGPConfiguration holds confd+BIRD's fields.
type BGPConfiguration struct {
	// ProgramClusterRoutes is the raw field; read it only through
	// internal/calico/config.Resolve.
	ProgramClusterRoutes string `json:"programClusterRoutes,omitempty"`
	// NodeToNodeMeshEnabled defaults to true when nil.
	NodeToNodeMeshEnabled *bool `json:"nodeToNodeMeshEnabled,omitempty"`
	ASNumber              int   `json:"asNumber,omitempty"`
	// BGPEnabled false means BIRD is not run at all (Calico's
	// CALICO_NETWORKING_BACKEND=none); nil means true.
	BGPEnabled *bool `json:"bgpEnabled,omitempty"`
	// KernelMetric is the metric BIRD writes kernel routes at. Zero keeps
	// the fork's behaviour (metric 0, replaceable by the programmer); BIRD 2's
	// own default is 32. A birdcage knob, not a Calico field.
	KernelMetric *int `json:"kernelMetric,omitempty"`
}

// MeshEnabled reports whether the iBGP full mesh between nodes is on.
func (b BGPConfiguration) MeshEnabled() bool {
	return b.NodeToNodeMeshEnabled == nil || *b.NodeToNodeMeshEnabled
}

// Enabled reports whether BGP (and so BIRD) runs.
func (b BGPConfiguration) Enabled() bool { return b.BGPEnabled == nil || *b.BGPEnabled }

// Cluster is one consistent read of every document.
type Cluster struct {
	Pools     []IPPool           `json:"pools"`
	Nodes     []Node             `json:"nodes"`
	Blocks    []BlockAffinity    `json:"blocks"`
	Workloads []Workload         `json:"workloads"`
	Peers     []BGPPeer          `json:"peers"`
	Felix     FelixConfiguration `json:"felixConfiguration"`
	BGP       BGPConfiguration   `json:"bgpConfiguration"`
}

// Node returns the named node.
func (c *Cluster) Node(name string) (Node, bool) {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// clone deep-copies a cluster through JSON; documents are small.
func (c *Cluster) clone() *Cluster {
	b, _ := json.Marshal(c)
	var out Cluster
	_ = json.Unmarshal(b, &out)
	return &out
}
