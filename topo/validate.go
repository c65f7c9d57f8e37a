package topo

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// ErrNoIPIP is returned (wrapped) when a topology needs tunl0 and the kernel
// has no ipip. Tests skip on it; the VM runner (ci/vm/run) provides a kernel
// that has it.
var ErrNoIPIP error = missingFeature{"ipip", "the kernel has no ipip (tunl0): run under ci/vm/run, or on a kernel with the ipip module"}

// missingFeature is an error that names the host feature that was missing
// (testenv.FeatureError), so tests skip on it by name.
type missingFeature struct{ feature, msg string }

func (e missingFeature) Error() string          { return e.msg }
func (e missingFeature) MissingFeature() string { return e.feature }

// Features is what the kernel can do, as far as a topology cares.
type Features struct {
	// IPIP is true when nodes can have a tunl0: the kernel's (ipip) or the
	// eBPF emulation's, as Tunnel says.
	IPIP bool
	// KernelIPIP is true when the kernel has ipip (an ipip link could be
	// made in a namespace), whichever tunl0 is chosen.
	KernelIPIP bool
	// Tunnel is how tunl0 is made: TunnelKernel ("" means it too),
	// TunnelEBPF or TunnelEBPFNoEncap.
	Tunnel string
	// TunnelErr, when IPIP is false, says why where that is not simply a
	// missing module (BIRDCAGE_TUNNEL=kernel on a kernel without ipip): it
	// fails a build instead of skipping it.
	TunnelErr error
}

var (
	namePattern  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	ifacePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]*$`)
)

const (
	maxNameLen      = 24 // netns "bcXXXXXX-" + name + "-w99" stays short
	maxIfaceLen     = 15 // IFNAMSIZ - 1
	maxWorkloads    = 64
	ipipAlways      = "Always"
	ipipCrossSubnet = "CrossSubnet"
	encapNever      = "Never"
)

// errorf builds an error for people: `topology "x.yaml": node "n4": ...`.
func (t *Topology) errorf(format string, args ...any) error {
	where := t.source
	if where == "" {
		where = t.Name
	}
	return fmt.Errorf("topology %q: "+format, append([]any{where}, args...)...)
}

// Validate checks the topology for everything that can be known without a
// kernel. Nothing is created when it fails.
func (t *Topology) Validate() error { return t.ValidateFor(Features{IPIP: true}) }

// ValidateFor checks the topology against a kernel's features too.
func (t *Topology) ValidateFor(f Features) error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }

	if t.Name == "" {
		add(t.errorf("field name: must be set"))
	}
	if len(t.Pools) == 0 {
		add(t.errorf("field pools: at least one pool is needed"))
	}
	pools := map[string]netip.Prefix{}
	for i, p := range t.Pools {
		where := fmt.Sprintf("pool %q", p.Name)
		if p.Name == "" {
			where = fmt.Sprintf("pools[%d]", i)
			add(t.errorf("%s: field name: must be set", where))
		} else if _, dup := pools[p.Name]; dup {
			add(t.errorf("%s: duplicate pool name", where))
		}
		pfx, err := netip.ParsePrefix(p.CIDR)
		if err != nil || pfx != pfx.Masked() {
			add(t.errorf("%s: field cidr: %q is not a network CIDR like 10.244.0.0/16", where, p.CIDR))
			continue
		}
		if p.Name != "" && !namePattern.MatchString(p.Name) {
			add(t.errorf("%s: field name: use lower-case letters, digits and dashes", where))
		}
		if why := insanePodRange(pfx); why != "" {
			add(t.errorf("%s: field cidr: %s is not a pod range: %s", where, p.CIDR, why))
		}
		for other, op := range pools {
			if op.Overlaps(pfx) {
				add(t.errorf("%s: field cidr: %s overlaps pool %q (%s)", where, p.CIDR, other, op))
			}
		}
		pools[p.Name] = pfx
		switch p.IPIPMode {
		case "", encapNever:
		case ipipAlways, ipipCrossSubnet:
			if pfx.Addr().Is6() {
				add(t.errorf("%s: field ipipMode: %s needs an IPv4 pool; IPIP is IPv4-only", where, p.IPIPMode))
			} else if !f.IPIP {
				why := ErrNoIPIP
				if f.TunnelErr != nil {
					why = f.TunnelErr
				}
				add(t.errorf("%s: field ipipMode: %s needs tunl0: %w", where, p.IPIPMode, why))
			}
		default:
			add(t.errorf("%s: field ipipMode: %q is not one of Always, CrossSubnet, Never", where, p.IPIPMode))
		}
		if p.VXLANMode != "" && p.VXLANMode != encapNever {
			add(t.errorf("%s: field vxlanMode: %q: only Never is modelled (VXLAN routes are always the programmer's)", where, p.VXLANMode))
		}
		if bs := p.blockSize(pfx); bs < pfx.Bits() || bs > pfx.Addr().BitLen() {
			add(t.errorf("%s: field blockSize: %d must be between the pool's /%d and /%d", where, bs, pfx.Bits(), pfx.Addr().BitLen()))
		}
	}

	names := map[string]string{} // every namespace name -> what it is
	claim := func(kind, name string, i int) string {
		where := fmt.Sprintf("%s %q", kind, name)
		if name == "" {
			where = fmt.Sprintf("%ss[%d]", kind, i)
			add(t.errorf("%s: field name: must be set", where))
			return where
		}
		if !namePattern.MatchString(name) || len(name) > maxNameLen {
			add(t.errorf("%s: field name: use lower-case letters, digits and dashes, at most %d characters", where, maxNameLen))
		}
		if other, dup := names[name]; dup {
			add(t.errorf("%s: duplicate name (also a %s)", where, other))
		}
		names[name] = kind
		return where
	}
	for i, s := range t.Switches {
		claim("switch", s.Name, i)
	}
	ifaces := map[string]Interface{} // "owner:iface" -> interface
	for i, r := range t.Routers {
		where := claim("router", r.Name, i)
		if r.RouterID != "" {
			if a, err := netip.ParseAddr(r.RouterID); err != nil || !a.Is4() {
				add(t.errorf("%s: field routerID: %q is not an IPv4 address", where, r.RouterID))
			}
		}
		t.validateInterfaces(where, r.Name, r.Interfaces, false, ifaces, add)
	}
	for i, n := range t.Nodes {
		where := claim("node", n.Name, i)
		adopted := n.Adopt != ""
		t.validateInterfaces(where, n.Name, n.Interfaces, adopted, ifaces, add)
		if n.Loopback != "" {
			if p, err := netip.ParsePrefix(n.Loopback); err != nil || !p.Addr().Is4() || p.Bits() != 32 {
				add(t.errorf("%s: field loopback: %q is not an IPv4 /32 like 10.255.0.1/32", where, n.Loopback))
			}
		} else if !adopted && (len(n.Interfaces) == 0 || n.Interfaces[0].Address == "") {
			add(t.errorf("%s: needs a node address: set loopback, or an address on its first interface", where))
		}
		if n.Workloads < 0 || n.Workloads > maxWorkloads {
			add(t.errorf("%s: field workloads: %d must be between 0 and %d", where, n.Workloads, maxWorkloads))
		}
		if n.ASNumber < 0 || n.ASNumber > 4294967295 {
			add(t.errorf("%s: field asNumber: %d is not a valid AS number", where, n.ASNumber))
		}
	}
	if len(t.Nodes) == 0 {
		add(t.errorf("field nodes: at least one node is needed"))
	}
	// Peers must name an interface that exists and points back.
	for key, ifc := range ifaces {
		if ifc.Peer == "" {
			continue
		}
		owner, name, _ := strings.Cut(key, ":")
		where := fmt.Sprintf("%s %q: interface %q", names[owner], owner, name)
		peer, ok := ifaces[ifc.Peer]
		switch {
		case !strings.Contains(ifc.Peer, ":"):
			add(t.errorf("%s: field peer: %q must be OWNER:INTERFACE, like tor-a:eth1", where, ifc.Peer))
		case !ok:
			peerOwner, _, _ := strings.Cut(ifc.Peer, ":")
			if _, exists := names[peerOwner]; !exists {
				add(t.errorf("%s: field peer: %q does not exist", where, peerOwner))
			} else {
				add(t.errorf("%s: field peer: %q has no such interface", where, ifc.Peer))
			}
		case peer.Peer != key:
			add(t.errorf("%s: field peer: %q must name %q as its peer too", where, ifc.Peer, key))
		}
	}
	t.validateAddresses(pools, add)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Blocks need valid pools and nodes, so they are checked last.
	if _, err := t.allocateBlocks(); err != nil {
		return err
	}
	return nil
}

func (t *Topology) validateInterfaces(where, owner string, ifs []Interface, adopted bool, all map[string]Interface, add func(error)) {
	switches := map[string]bool{}
	for _, s := range t.Switches {
		switches[s.Name] = true
	}
	gateways := 0
	for i, ifc := range ifs {
		iw := fmt.Sprintf("%s: interface %q", where, ifc.Name)
		if ifc.Name == "" {
			iw = fmt.Sprintf("%s: interfaces[%d]", where, i)
			add(t.errorf("%s: field name: must be set", iw))
			continue
		}
		if !ifacePattern.MatchString(ifc.Name) || len(ifc.Name) > maxIfaceLen || ifc.Name == "lo" || ifc.Name == "tunl0" || ifc.Name == tunnelPeer {
			add(t.errorf("%s: field name: an interface name of at most %d characters, not lo, tunl0 or %s", iw, maxIfaceLen, tunnelPeer))
		}
		key := owner + ":" + ifc.Name
		if _, dup := all[key]; dup {
			add(t.errorf("%s: duplicate interface name", iw))
		}
		all[key] = ifc
		switch {
		case adopted:
			if ifc.Switch != "" || ifc.Peer != "" {
				add(t.errorf("%s: an adopted node's interfaces already exist; drop field switch/peer", iw))
			}
		case ifc.Switch == "" && ifc.Peer == "":
			add(t.errorf("%s: set switch (an L2 segment) or peer (OWNER:INTERFACE)", iw))
		case ifc.Switch != "" && ifc.Peer != "":
			add(t.errorf("%s: set switch or peer, not both", iw))
		case ifc.Switch != "" && !switches[ifc.Switch]:
			add(t.errorf("%s: field switch: %q does not exist; switches are %s", iw, ifc.Switch, listOr(keys(switches))))
		}
		var subnet netip.Prefix
		if ifc.Address != "" {
			p, err := netip.ParsePrefix(ifc.Address)
			if err != nil || !p.Addr().Is4() {
				add(t.errorf("%s: field address: %q is not an IPv4 CIDR like 10.0.1.11/24", iw, ifc.Address))
			} else {
				subnet = p.Masked()
			}
		}
		if ifc.Address6 != "" {
			if p, err := netip.ParsePrefix(ifc.Address6); err != nil || !p.Addr().Is6() {
				add(t.errorf("%s: field address6: %q is not an IPv6 CIDR like fd00:10::11/64", iw, ifc.Address6))
			}
		}
		if ifc.Gateway != "" {
			gateways++
			gw, err := netip.ParseAddr(ifc.Gateway)
			switch {
			case err != nil:
				add(t.errorf("%s: field gateway: %q is not an IP address", iw, ifc.Gateway))
			case !subnet.IsValid() || !subnet.Contains(gw):
				add(t.errorf("%s: field gateway: %s is not inside the interface's subnet %s", iw, ifc.Gateway, ifc.Address))
			}
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func listOr(xs []string) string {
	if len(xs) == 0 {
		return "(none)"
	}
	return strings.Join(xs, ", ")
}

func (p Pool) blockSize(pfx netip.Prefix) int {
	if p.BlockSize != 0 {
		return p.BlockSize
	}
	if pfx.Addr().Is6() {
		return 122
	}
	return 26
}

// IsIPIP reports whether the pool's traffic is IPIP-encapsulated.
func (p Pool) IsIPIP() bool { return p.IPIPMode == ipipAlways || p.IPIPMode == ipipCrossSubnet }

// NeedsTunnel reports whether any pool is IPIP, so every node needs tunl0.
func (t *Topology) NeedsTunnel() bool {
	for _, p := range t.Pools {
		if p.IsIPIP() {
			return true
		}
	}
	return false
}

// insanePodRange says why a pool CIDR cannot hold pods, or "".
func insanePodRange(p netip.Prefix) string {
	a := p.Addr()
	switch {
	case p.Bits() == 0:
		return "it is the whole address space"
	case a.Is4() && p.Bits() < 8:
		return "an IPv4 pool wider than /8 takes in special-use ranges"
	case netip.MustParsePrefix("127.0.0.0/8").Overlaps(p), a.IsLoopback():
		return "it overlaps the loopback range"
	case netip.MustParsePrefix("169.254.0.0/16").Overlaps(p), netip.MustParsePrefix("fe80::/10").Overlaps(p):
		return "it overlaps the link-local range (169.254.1.1 is the workloads' gateway)"
	case netip.MustParsePrefix("224.0.0.0/3").Overlaps(p), netip.MustParsePrefix("ff00::/8").Overlaps(p):
		return "it overlaps the multicast or reserved range"
	case netip.MustParsePrefix("0.0.0.0/8").Overlaps(p):
		return "it overlaps 0.0.0.0/8 (this network)"
	}
	return ""
}

// validateAddresses: every interface, loopback and router-id address is
// used once in the whole topology, and none lies inside a pool (a pool is
// for pods; a node or link address inside it would be routed as a pod's).
func (t *Topology) validateAddresses(pools map[string]netip.Prefix, add func(error)) {
	type use struct{ where, field string }
	seen := map[netip.Addr]use{}
	claim := func(where, field, value string) {
		if value == "" {
			return
		}
		var a netip.Addr
		if p, err := netip.ParsePrefix(value); err == nil {
			a = p.Addr()
		} else if x, err := netip.ParseAddr(value); err == nil {
			a = x
		} else {
			return // reported where the field is parsed
		}
		if prev, dup := seen[a]; dup {
			add(t.errorf("%s: field %s: %s is already the address of %s (field %s); addresses must be unique", where, field, a, prev.where, prev.field))
		} else {
			seen[a] = use{where, field}
		}
		for name, p := range pools {
			if p.Contains(a) {
				add(t.errorf("%s: field %s: %s lies inside pool %q (%s), which is for pods", where, field, a, name, p))
			}
		}
	}
	ifaces := func(where string, ifs []Interface) {
		for _, ifc := range ifs {
			iw := fmt.Sprintf("%s: interface %q", where, ifc.Name)
			claim(iw, "address", ifc.Address)
			claim(iw, "address6", ifc.Address6)
		}
	}
	for _, r := range t.Routers {
		ifaces(fmt.Sprintf("router %q", r.Name), r.Interfaces)
	}
	for _, n := range t.Nodes {
		where := fmt.Sprintf("node %q", n.Name)
		claim(where, "loopback", n.Loopback)
		ifaces(where, n.Interfaces)
	}
}
