package datastore

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"time"
)

// FieldError says which field of a document is wrong and what would be valid.
type FieldError struct {
	Field string // JSON name, dotted for nested fields ("uplinks[1].gateway")
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %s: %s", e.Field, e.Msg) }

// DocumentError names the document (its file, for DirStore) an error is about.
type DocumentError struct {
	Path string
	Err  error
}

func (e *DocumentError) Error() string { return fmt.Sprintf("datastore %q: %v", e.Path, e.Err) }
func (e *DocumentError) Unwrap() error { return e.Err }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

func oneOf(field, value string, valid ...string) error {
	for _, v := range valid {
		if value == v {
			return nil
		}
	}
	return fieldErr(field, "%q is not one of %s", value, strings.Join(valid, ", "))
}

// parseNetwork parses a CIDR that must be a network address (no host bits).
func parseNetwork(field, s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, fieldErr(field, "required (a CIDR such as 10.65.0.0/16)")
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fieldErr(field, "%q is not a CIDR: %v", s, err)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fieldErr(field, "%q has host bits set; did you mean %s", s, p.Masked())
	}
	return p, nil
}

// parseInterfaceAddress parses an address with its subnet ("10.0.1.11/24").
func parseInterfaceAddress(field, s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fieldErr(field, "%q is not an address with a prefix length (like 10.0.1.11/24): %v", s, err)
	}
	return p, nil
}

func parseAddr(field, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fieldErr(field, "%q is not an IP address: %v", s, err)
	}
	return a, nil
}

func checkASN(field string, asn int) error {
	if asn < 0 || asn > 4294967295 {
		return fieldErr(field, "%d is not an AS number (0 for the default, or 1..4294967295)", asn)
	}
	return nil
}

func checkInterfaceName(field, s string) error {
	if s == "" {
		return fieldErr(field, "required (an interface name)")
	}
	if len(s) > 15 || strings.ContainsAny(s, "/ \t\n") {
		return fieldErr(field, "%q is not a Linux interface name (at most 15 characters, no '/' or spaces)", s)
	}
	return nil
}

// Validate checks one IP pool document.
func (p IPPool) Validate() error {
	if p.Name == "" {
		return fieldErr("name", "required")
	}
	cidr, err := parseNetwork("cidr", p.CIDR)
	if err != nil {
		return err
	}
	if err := oneOf("ipipMode", p.IPIPMode, "", EncapAlways, EncapCrossSubnet, EncapNever); err != nil {
		return fieldErr("ipipMode", "%q is not one of %s, %s, %s (empty means %s)", p.IPIPMode, EncapAlways, EncapCrossSubnet, EncapNever, EncapNever)
	}
	if p.VXLANMode != "" && p.VXLANMode != EncapNever {
		return fieldErr("vxlanMode", "%q is not one of %s (VXLAN pools are always the programmer's and are not modelled)", p.VXLANMode, EncapNever)
	}
	if p.BlockSize != 0 {
		lo, hi := 20, 32
		if cidr.Addr().Is6() {
			lo, hi = 116, 128
		}
		if p.BlockSize < lo || p.BlockSize > hi {
			return fieldErr("blockSize", "%d is out of range %d..%d for this address family", p.BlockSize, lo, hi)
		}
		if p.BlockSize < cidr.Bits() {
			return fieldErr("blockSize", "%d is shorter than the pool's prefix /%d", p.BlockSize, cidr.Bits())
		}
	}
	return nil
}

// Validate checks one node document.
func (n Node) Validate() error {
	if n.Name == "" {
		return fieldErr("name", "required")
	}
	if n.IPv4Address != "" {
		p, err := parseInterfaceAddress("ipv4Address", n.IPv4Address)
		if err != nil {
			return err
		}
		if !p.Addr().Is4() {
			return fieldErr("ipv4Address", "%q is not an IPv4 address", n.IPv4Address)
		}
	}
	if n.IPv6Address != "" {
		p, err := parseInterfaceAddress("ipv6Address", n.IPv6Address)
		if err != nil {
			return err
		}
		if !p.Addr().Is6() || p.Addr().Is4In6() {
			return fieldErr("ipv6Address", "%q is not an IPv6 address", n.IPv6Address)
		}
	}
	if err := checkASN("asNumber", n.ASNumber); err != nil {
		return err
	}
	if n.RouterID != "" {
		a, err := parseAddr("routerID", n.RouterID)
		if err != nil {
			return err
		}
		if !a.Is4() {
			return fieldErr("routerID", "%q is not an IPv4 address (a BGP router ID is 32 bits)", n.RouterID)
		}
	}
	for i, u := range n.Uplinks {
		f := fmt.Sprintf("uplinks[%d]", i)
		if err := checkInterfaceName(f+".interface", u.Interface); err != nil {
			return err
		}
		if u.Address != "" {
			if _, err := parseInterfaceAddress(f+".address", u.Address); err != nil {
				return err
			}
		}
		if u.Gateway != "" {
			if _, err := parseAddr(f+".gateway", u.Gateway); err != nil {
				return err
			}
		}
	}
	return nil
}

// Validate checks one block affinity document.
func (b BlockAffinity) Validate() error {
	if _, err := parseNetwork("cidr", b.CIDR); err != nil {
		return err
	}
	if b.Node == "" {
		return fieldErr("node", "required (the name of the node the block is affine to)")
	}
	return nil
}

// Validate checks one workload document.
func (w Workload) Validate() error {
	if w.Name == "" {
		return fieldErr("name", "required")
	}
	if w.Node == "" {
		return fieldErr("node", "required")
	}
	if err := checkInterfaceName("interface", w.Interface); err != nil {
		return err
	}
	for i, a := range w.Addresses {
		f := fmt.Sprintf("addresses[%d]", i)
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return fieldErr(f, "%q is not a /32 or /128 CIDR: %v", a, err)
		}
		if p.Bits() != p.Addr().BitLen() {
			return fieldErr(f, "%q is not a /32 or /128 CIDR", a)
		}
	}
	return nil
}

// Validate checks one BGP peer document.
func (p BGPPeer) Validate() error {
	if p.Name == "" {
		return fieldErr("name", "required")
	}
	if _, err := parseAddr("peerIP", p.PeerIP); err != nil {
		return err
	}
	if p.ASNumber < 1 || p.ASNumber > 4294967295 {
		return fieldErr("asNumber", "%d is not an AS number (1..4294967295)", p.ASNumber)
	}
	return nil
}

// Validate checks the FelixConfiguration document. ProgramClusterRoutes is
// deliberately not checked: an unknown value is not an error but resolves to
// the release default (see internal/calico/config.Resolve), identically on both
// sides.
func (f FelixConfiguration) Validate() error {
	if f.DeviceRouteProtocol < 0 || f.DeviceRouteProtocol > 255 {
		return fieldErr("deviceRouteProtocol", "%d is not a kernel route protocol (0 for the default, or 1..255)", f.DeviceRouteProtocol)
	}
	if f.RouteRefreshInterval != "" {
		d, err := time.ParseDuration(f.RouteRefreshInterval)
		if err != nil {
			return fieldErr("routeRefreshInterval", "%q is not a duration (like \"90s\" or \"500ms\"): %v", f.RouteRefreshInterval, err)
		}
		if d < 0 {
			return fieldErr("routeRefreshInterval", "%q is negative (0 disables the periodic refresh)", f.RouteRefreshInterval)
		}
	}
	return nil
}

// Validate checks the BGPConfiguration document; ProgramClusterRoutes is not
// checked, as for FelixConfiguration.
func (b BGPConfiguration) Validate() error {
	if err := checkASN("asNumber", b.ASNumber); err != nil {
		return err
	}
	if b.KernelMetric != nil && (*b.KernelMetric < 0 || *b.KernelMetric > 4294967295) {
		return fieldErr("kernelMetric", "%d is not a kernel route metric (0..4294967295)", *b.KernelMetric)
	}
	return nil
}

// validateCluster checks what no single document can: overlapping pools and
// two nodes' affinities for one block. blockNames[i] is the document name of
// c.Blocks[i]; path turns a kind and name into the file for error messages.
func validateCluster(c *Cluster, blockNames []string, path func(Kind, string) string) error {
	for i := range c.Pools {
		pi := netip.MustParsePrefix(c.Pools[i].CIDR)
		for j := i + 1; j < len(c.Pools); j++ {
			pj := netip.MustParsePrefix(c.Pools[j].CIDR)
			if pi.Overlaps(pj) {
				return &DocumentError{Path: path(KindIPPool, c.Pools[j].Name),
					Err: fieldErr("cidr", "%s overlaps pool %q (%s)", pj, c.Pools[i].Name, pi)}
			}
		}
	}
	seen := map[netip.Prefix]int{}
	for i, b := range c.Blocks {
		p := netip.MustParsePrefix(b.CIDR)
		if j, ok := seen[p]; ok && c.Blocks[j].Node != b.Node {
			return &DocumentError{Path: path(KindBlockAffinity, blockNames[i]),
				Err: fieldErr("cidr", "block %s is also affine to node %q (%s)", p, c.Blocks[j].Node, path(KindBlockAffinity, blockNames[j]))}
		}
		seen[p] = i
	}
	return nil
}

// jsonFieldNames lists the JSON field names of a struct type, for "unknown
// field" errors.
func jsonFieldNames(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			continue
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

// checkExactKeys rejects object keys that match a field only case-
// insensitively ("ipipmode"), which encoding/json would silently accept; the
// real datastores are case-sensitive, so such a field would be ignored there.
func checkExactKeys(raw json.RawMessage, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return nil // not an object; the typed decode reports it
		}
		if path != "" && !strings.HasSuffix(path, ".") {
			path += "."
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				fields[name] = t.Field(i).Type
			}
		}
		for k, v := range obj {
			ft, ok := fields[k]
			if !ok {
				return fieldErr(path+k, "unknown field; valid fields are %s", jsonFieldNames(t))
			}
			if err := checkExactKeys(v, ft, path+k); err != nil {
				return err
			}
		}
	case reflect.Slice:
		var arr []json.RawMessage
		if err := json.Unmarshal(raw, &arr); err != nil {
			return nil
		}
		for i, v := range arr {
			if err := checkExactKeys(v, t.Elem(), fmt.Sprintf("%s[%d].", strings.TrimSuffix(path, "."), i)); err != nil {
				return err
			}
		}
	}
	return nil
}
