package confd

import (
	"bytes"
	_ "embed"
	"fmt"
	"net/netip"
	"strings"
	"text/template"
)

// Router describes a plain BGP router that is not a cluster node: a ToR in
// the dual-ToR topology, or an external router. It speaks eBGP to the nodes
// and re-advertises what it learns, so ECMP on the nodes comes from BGP.
type Router struct {
	// Name labels the config; it is not used by BIRD.
	Name string
	// RouterID is an IPv4 address, required.
	RouterID string
	// AS is the router's own AS number.
	AS int
	// Neighbors are the sessions, usually one per node link.
	Neighbors []Neighbor
	// AnnounceConnected also advertises the router's connected subnets
	// (useful when nodes must reach each other's link addresses).
	AnnounceConnected bool
	// KernelMetric is the metric of the routes the router installs.
	KernelMetric int
	// Timers as for nodes; zero fields take DefaultTimers.
	Timers Timers
}

// Neighbor is one BGP session of a Router.
type Neighbor struct {
	// Name becomes part of the BIRD protocol name; empty uses the address.
	Name    string
	Address string
	AS      int
	// Source is the local address on the link; empty lets BIRD choose.
	Source string
	// Multihop is for neighbours that are not on a connected subnet.
	Multihop bool
}

// RenderRouter renders a router's BIRD 2 config: eBGP (or iBGP, where a
// neighbour shares the AS) to every neighbour, next hop self, BGP routes
// installed in the kernel with ECMP (merge paths on).
func RenderRouter(r Router) ([]byte, error) {
	what := fmt.Sprintf("router %q", r.Name)
	if a, err := netip.ParseAddr(r.RouterID); err != nil || !a.Is4() {
		return nil, fmt.Errorf("%s: routerID %q: must be an IPv4 address", what, r.RouterID)
	}
	if r.AS <= 0 {
		return nil, fmt.Errorf("%s: AS %d: must be a positive AS number", what, r.AS)
	}
	if r.KernelMetric < 0 {
		return nil, fmt.Errorf("%s: kernelMetric %d: must not be negative", what, r.KernelMetric)
	}
	if err := r.Timers.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	v := routerView{Router: r, Timers: r.Timers.withDefaults()}
	seen := map[string]bool{}
	for i, n := range r.Neighbors {
		a, err := netip.ParseAddr(n.Address)
		if err != nil {
			return nil, fmt.Errorf("%s: neighbor %d (%q): address %q: %v", what, i, n.Name, n.Address, err)
		}
		if n.AS <= 0 {
			return nil, fmt.Errorf("%s: neighbor %s: AS %d: must be a positive AS number", what, a, n.AS)
		}
		nv := routerNeighborView{Neighbor: n, Family: "ipv4", Internal: n.AS == r.AS}
		if a.Is6() {
			nv.Family = "ipv6"
		}
		if n.Source != "" {
			s, err := netip.ParseAddr(n.Source)
			if err != nil || s.Is4() != a.Is4() {
				return nil, fmt.Errorf("%s: neighbor %s: source %q: must be an address of the same family", what, a, n.Source)
			}
		}
		nv.Proto = neighborProto(n, a)
		if seen[nv.Proto] {
			return nil, fmt.Errorf("%s: neighbor %s: protocol name %s used twice; give neighbours unique names and addresses", what, a, nv.Proto)
		}
		seen[nv.Proto] = true
		v.Neighbors = append(v.Neighbors, nv)
	}
	var buf bytes.Buffer
	if err := routerTemplate.Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return buf.Bytes(), nil
}

// RouterProtocols returns the BIRD protocol names RenderRouter gives r's
// sessions, in order, for WaitEstablished.
func RouterProtocols(r Router) []string {
	var out []string
	for _, n := range r.Neighbors {
		a, _ := netip.ParseAddr(n.Address)
		out = append(out, neighborProto(n, a))
	}
	return out
}

// neighborProto names a router's session: Peer_<name> or Peer_<address>.
func neighborProto(n Neighbor, a netip.Addr) string {
	if n.Name == "" {
		return protoName("Peer", a)
	}
	return "Peer_" + strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' {
			return c
		}
		return '_'
	}, n.Name)
}

type routerView struct {
	Router
	Timers    Timers
	Neighbors []routerNeighborView
}

type routerNeighborView struct {
	Neighbor
	Proto, Family string
	Internal      bool
}

//go:embed router.conf.tmpl
var routerTemplateText string

var routerTemplate = template.Must(template.New("router.conf").Parse(routerTemplateText))
