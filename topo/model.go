package topo

// Topology is a cluster drawn as nodes, routers and L2 switches. It reads the
// same from YAML (see examples/) and from Go (see New and the options).
type Topology struct {
	Name     string   `json:"name"`
	Pools    []Pool   `json:"pools"`
	Switches []Switch `json:"switches,omitempty"`
	Routers  []Router `json:"routers,omitempty"`
	Nodes    []Node   `json:"nodes"`

	// source names the file the topology came from, for error messages.
	source string
}

// Pool is an IP pool workload addresses come from.
type Pool struct {
	Name string `json:"name"`
	CIDR string `json:"cidr"`
	// IPIPMode is Always, CrossSubnet or Never (default Never).
	IPIPMode string `json:"ipipMode,omitempty"`
	// VXLANMode is modelled only as Never: VXLAN routes are always Felix's
	// and are not what birdcage measures.
	VXLANMode string `json:"vxlanMode,omitempty"`
	// BlockSize is the prefix length of per-node blocks (default 26 for
	// IPv4, 122 for IPv6).
	BlockSize int `json:"blockSize,omitempty"`
}

// Switch is an L2 segment: a Linux bridge inside a namespace of its own.
type Switch struct {
	Name string `json:"name"`
}

// Router is a namespace that forwards between its interfaces: a plain
// router, or a ToR that runs BIRD when a harness asks it to.
type Router struct {
	Name       string      `json:"name"`
	ASNumber   int         `json:"asNumber,omitempty"`
	RouterID   string      `json:"routerID,omitempty"`
	Plane      string      `json:"plane,omitempty"` // dual-ToR plane ("a", "b")
	Interfaces []Interface `json:"interfaces"`
}

// Node is a cluster node: a namespace that holds workloads' host ends and
// runs the route programmer and BIRD.
type Node struct {
	Name     string `json:"name"`
	ASNumber int    `json:"asNumber,omitempty"`
	// Loopback is a /32 on lo that is the node's address (dual-ToR). Empty
	// means the first interface's address is the node's address.
	Loopback   string      `json:"loopback,omitempty"`
	Interfaces []Interface `json:"interfaces,omitempty"`
	// Blocks are the node's IPAM blocks. Empty means one block per pool,
	// allocated in node order.
	Blocks []string `json:"blocks,omitempty"`
	// Workloads is how many workloads (pods) the node runs.
	Workloads int `json:"workloads,omitempty"`
	// RouteReflector makes the node an iBGP route reflector; when any node
	// is one, the node-to-node mesh is off unless the BGPConfiguration
	// says otherwise, and the other nodes peer with the reflectors.
	RouteReflector bool `json:"routeReflector,omitempty"`
	// Adopt takes an existing network namespace instead of creating one:
	// a path (/var/run/netns/x, /proc/PID/ns/net) or "pid:PID" (a kind node
	// container). An adopted namespace is never deleted, and its interfaces
	// are used as found.
	Adopt string `json:"adopt,omitempty"`
}

// Interface is one NIC of a node or router. It is plugged into a switch, or
// wired point-to-point to a peer interface ("router:eth1").
type Interface struct {
	Name     string `json:"name"`
	Switch   string `json:"switch,omitempty"`
	Peer     string `json:"peer,omitempty"`
	Address  string `json:"address,omitempty"`  // IPv4 CIDR
	Address6 string `json:"address6,omitempty"` // IPv6 CIDR
	// Gateway makes a default route via this address. Two interfaces with
	// gateways make an ECMP default route.
	Gateway string `json:"gateway,omitempty"`
}
