package topo

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// GeneratedPrefix marks a topology generated from a short spec instead of
// read from YAML: "generated:nodes=100,racks=4,fabric=dualtor".
const GeneratedPrefix = "generated:"

// Fabrics a generated topology can have.
const (
	// FabricL2: every node on one L2 segment, an iBGP full mesh between
	// nodes or route reflectors (rr=K), as the noencap and ipip built-ins.
	FabricL2 = "l2"
	// FabricDualToR: racks of nodes, each node wired to its rack's ToR in
	// plane A and plane B, each plane's ToRs joined by a spine; eBGP from
	// every node to its two ToRs, as the dualtor built-in.
	FabricDualToR = "dualtor"
)

// GenSpec is what Generate builds from. The zero value of a field takes
// the default named on it.
type GenSpec struct {
	Nodes     int    // required, 1..maxGenNodes
	Racks     int    // dualtor only; default 1 for l2, 2 for dualtor
	RR        int    // l2 only: this many route reflectors instead of the full mesh; default 0
	Pool      string // "noencap" (default) or "ipip"
	BlockSize int    // default 26
	Workloads int    // per node; default 1
	Fabric    string // FabricL2 (default) or FabricDualToR

	source string // the text ParseGenSpec read, for errors
}

const maxGenNodes = 900 // node AS numbers stay inside the 2-byte private range

var genKeys = []string{"nodes", "racks", "rr", "pool", "block", "workloads", "fabric"}

// ParseGenSpec reads "nodes=100,racks=4,rr=2,pool=ipip,block=26,workloads=1,fabric=l2"
// (the part after GeneratedPrefix). Errors name the key and its valid values.
func ParseGenSpec(s string) (GenSpec, error) {
	var g GenSpec
	src := GeneratedPrefix + s
	fail := func(format string, args ...any) (GenSpec, error) {
		return GenSpec{}, fmt.Errorf("topology %q: "+format, append([]any{src}, args...)...)
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || v == "" {
			return fail("%q: want KEY=VALUE; keys are %s", kv, strings.Join(genKeys, ", "))
		}
		if seen[k] {
			return fail("key %s given twice", k)
		}
		seen[k] = true
		num := func(dst *int) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("topology %q: key %s: %q is not a whole number", src, k, v)
			}
			*dst = n
			return nil
		}
		var err error
		switch k {
		case "nodes":
			err = num(&g.Nodes)
		case "racks":
			err = num(&g.Racks)
		case "rr":
			err = num(&g.RR)
		case "block":
			err = num(&g.BlockSize)
		case "workloads":
			err = num(&g.Workloads)
		case "pool":
			g.Pool = v
		case "fabric":
			g.Fabric = v
		default:
			return fail("unknown key %q; keys are %s", k, strings.Join(genKeys, ", "))
		}
		if err != nil {
			return GenSpec{}, err
		}
	}
	if !seen["nodes"] {
		return fail("key nodes is required (e.g. %snodes=20)", GeneratedPrefix)
	}
	g.source = src
	return g, nil
}

// String renders the spec the way ParseGenSpec reads it, defaults filled.
func (g GenSpec) String() string {
	g = g.withDefaults()
	s := fmt.Sprintf("nodes=%d,fabric=%s,pool=%s,block=%d,workloads=%d", g.Nodes, g.Fabric, g.Pool, g.BlockSize, g.Workloads)
	if g.Fabric == FabricDualToR {
		s += fmt.Sprintf(",racks=%d", g.Racks)
	}
	if g.RR > 0 {
		s += fmt.Sprintf(",rr=%d", g.RR)
	}
	return s
}

func (g GenSpec) withDefaults() GenSpec {
	if g.Fabric == "" {
		g.Fabric = FabricL2
	}
	if g.Racks == 0 {
		g.Racks = 1
		if g.Fabric == FabricDualToR {
			g.Racks = 2
		}
	}
	if g.Pool == "" {
		g.Pool = "noencap"
	}
	if g.BlockSize == 0 {
		g.BlockSize = 26
	}
	if g.Workloads == 0 {
		g.Workloads = 1
	}
	return g
}

func (g GenSpec) validate(src string) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("topology %q: "+format, append([]any{src}, args...)...)
	}
	switch {
	case g.Nodes < 1 || g.Nodes > maxGenNodes:
		return fail("key nodes: %d must be between 1 and %d", g.Nodes, maxGenNodes)
	case g.Fabric != FabricL2 && g.Fabric != FabricDualToR:
		return fail("key fabric: %q is not one of %s, %s", g.Fabric, FabricL2, FabricDualToR)
	case g.Pool != "noencap" && g.Pool != "ipip":
		return fail("key pool: %q is not one of noencap, ipip", g.Pool)
	case g.BlockSize < 20 || g.BlockSize > 32:
		return fail("key block: /%d must be between /20 and /32 (the pool is a /16)", g.BlockSize)
	case g.Workloads < 0 || g.Workloads > maxWorkloads:
		return fail("key workloads: %d must be between 0 and %d", g.Workloads, maxWorkloads)
	case g.RR < 0 || g.RR > g.Nodes:
		return fail("key rr: %d must be between 0 and the number of nodes (%d)", g.RR, g.Nodes)
	case g.Fabric == FabricL2 && g.Racks != 1:
		return fail("key racks: fabric l2 is one L2 segment (racks=1); racks of nodes are fabric=dualtor")
	case g.Fabric == FabricDualToR && (g.Racks < 1 || g.Racks > 80):
		return fail("key racks: %d must be between 1 and 80", g.Racks)
	case g.Fabric == FabricDualToR && g.Racks > g.Nodes:
		return fail("key racks: %d racks for %d nodes leaves a rack empty", g.Racks, g.Nodes)
	case g.Fabric == FabricDualToR && (g.Nodes+g.Racks-1)/g.Racks > 240:
		return fail("key racks: at most 240 nodes per rack's /24; %d nodes need at least %d racks", g.Nodes, (g.Nodes+239)/240)
	case g.Fabric == FabricDualToR && g.RR > 0:
		return fail("key rr: fabric dualtor peers every node with its ToRs (eBGP); route reflectors are for fabric l2")
	case g.Fabric == FabricDualToR && g.Pool == "ipip":
		return fail("key pool: ipip over fabric dualtor carries no traffic (the ToRs set next hop self; see the ipipecmp scenario); use pool=noencap")
	}
	blocks := 1 << (g.BlockSize - 16)
	if g.Nodes > blocks {
		return fail("key block: a /16 pool has %d /%d blocks, fewer than %d nodes", blocks, g.BlockSize, g.Nodes)
	}
	return nil
}

// Generate builds an N-node topology from a spec. The result validates
// like a YAML topology (Validate is called on it).
func Generate(g GenSpec) (*Topology, error) {
	src := g.source
	if src == "" {
		src = GeneratedPrefix + g.String()
	}
	g = g.withDefaults()
	if err := g.validate(src); err != nil {
		return nil, err
	}
	var t *Topology
	switch g.Fabric {
	case FabricL2:
		t = generateL2(g)
	case FabricDualToR:
		t = generateDualToR(g)
	}
	t.source = src
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

func genPool(g GenSpec) Pool {
	if g.Pool == "ipip" {
		return Pool{Name: "ipip-pool", CIDR: "10.245.0.0/16", IPIPMode: IPIPAlways, BlockSize: g.BlockSize}
	}
	return Pool{Name: "noencap-pool", CIDR: "10.244.0.0/16", IPIPMode: IPIPNever, BlockSize: g.BlockSize}
}

// generateL2: node-i at 10.10.0.0/16 + 256 + i on switch lan; the first rr
// nodes reflect.
func generateL2(g GenSpec) *Topology {
	t := &Topology{Name: "generated-l2", Pools: []Pool{genPool(g)}, Switches: []Switch{{Name: "lan"}}}
	base := netip.MustParseAddr("10.10.1.0")
	for i := 1; i <= g.Nodes; i++ {
		t.Nodes = append(t.Nodes, Node{
			Name:           fmt.Sprintf("node-%d", i),
			Interfaces:     []Interface{{Name: "eth0", Switch: "lan", Address: addOffset(base, uint64(i)).String() + "/16"}},
			Workloads:      g.Workloads,
			RouteReflector: i <= g.RR,
		})
	}
	return t
}

// generateDualToR generalises the dualtor built-in to R racks: rack r has
// switches rack<r>-a and rack<r>-b (10.11.r.0/24, 10.12.r.0/24), ToRs
// tor-<r>a and tor-<r>b (AS 65450+r, shared by the rack's two ToRs as in
// the built-in), and each plane's ToRs hang off spine-a / spine-b (AS 65534)
// on point-to-point /31s. Nodes are dealt to racks in turn; node i is AS
// 64512+i with loopback 10.255.x.y/32.
func generateDualToR(g GenSpec) *Topology {
	t := &Topology{Name: "generated-dualtor", Pools: []Pool{genPool(g)}}
	spines := map[string]*Router{}
	for _, plane := range []string{"a", "b"} {
		spines[plane] = &Router{Name: "spine-" + plane, ASNumber: 65534, Plane: plane}
	}
	perRack := make([]int, g.Racks+1)
	for r := 1; r <= g.Racks; r++ {
		for pi, plane := range []string{"a", "b"} {
			sw := fmt.Sprintf("rack%d-%s", r, plane)
			t.Switches = append(t.Switches, Switch{Name: sw})
			second := 11 + pi // 10.11 plane a, 10.12 plane b
			link := netip.AddrFrom4([4]byte{10, byte(second), 254, byte(2 * (r - 1))})
			tor := Router{
				Name: fmt.Sprintf("tor-%d%s", r, plane), ASNumber: 65450 + r, Plane: plane,
				Interfaces: []Interface{
					{Name: "eth0", Switch: sw, Address: fmt.Sprintf("10.%d.%d.1/24", second, r)},
					{Name: "eth1", Peer: fmt.Sprintf("spine-%s:eth%d", plane, r), Address: addOffset(link, 1).String() + "/31"},
				},
			}
			t.Routers = append(t.Routers, tor)
			spines[plane].Interfaces = append(spines[plane].Interfaces, Interface{
				Name: fmt.Sprintf("eth%d", r), Peer: tor.Name + ":eth1", Address: link.String() + "/31",
			})
		}
	}
	t.Routers = append(t.Routers, *spines["a"], *spines["b"])
	for i := 1; i <= g.Nodes; i++ {
		r := (i-1)%g.Racks + 1
		perRack[r]++
		host := 10 + perRack[r]
		t.Nodes = append(t.Nodes, Node{
			Name:     fmt.Sprintf("node-%d", i),
			ASNumber: 64512 + i,
			Loopback: fmt.Sprintf("10.255.%d.%d/32", i/256, i%256),
			Interfaces: []Interface{
				{Name: "eth0", Switch: fmt.Sprintf("rack%d-a", r), Address: fmt.Sprintf("10.11.%d.%d/24", r, host), Gateway: fmt.Sprintf("10.11.%d.1", r)},
				{Name: "eth1", Switch: fmt.Sprintf("rack%d-b", r), Address: fmt.Sprintf("10.12.%d.%d/24", r, host), Gateway: fmt.Sprintf("10.12.%d.1", r)},
			},
			Workloads: g.Workloads,
		})
	}
	sort.SliceStable(t.Routers, func(i, j int) bool { return t.Routers[i].Name < t.Routers[j].Name })
	return t
}
