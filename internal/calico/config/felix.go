package config

// The programmer side of a release: what Felix's route table and its IPIP
// manager do in that release, read on each release branch of
// projectcalico/calico (release-v3.31 = 3cdeae8f7ace, release-v3.32 =
// de60d98e97a7, release-v3.33 = 6609dea54713). The facts are restated in
// docs/conformance-programmer.md with the file each was read in; the root
// tests of dataplane/routetable hold them as literal kernel requests.
//
// This file holds only the Felix-side methods; the release list, parsing
// and programClusterRoutes resolution live in config.go.

// WriteOrder is the order in which one programming pass sends its kernel
// writes.
type WriteOrder int

const (
	// DeleteFirst sends every delete of the pass before any replace: Felix's
	// order in all three releases (routetable/route_table.go applyUpdates,
	// "first clean up any old routes", then the RouteReplace loop).
	DeleteFirst WriteOrder = iota
	// ReplaceFirst sends every replace before any delete: birdcage's order
	// before issue 25, kept as a knob. It is no release's behaviour.
	ReplaceFirst
)

func (o WriteOrder) String() string {
	if o == ReplaceFirst {
		return "replace-first"
	}
	return "delete-first"
}

// ParseWriteOrder reads "delete-first" or "replace-first".
func ParseWriteOrder(s string) (WriteOrder, bool) {
	switch s {
	case "delete-first":
		return DeleteFirst, true
	case "replace-first":
		return ReplaceFirst, true
	}
	return DeleteFirst, false
}

// ProgrammerWriteOrder is the write order of this release's programmer:
// delete-first in 3.31, 3.32 and 3.33 alike.
func (r Release) ProgrammerWriteOrder() WriteOrder { return DeleteFirst }

// ProgrammerRequestsInFlight is how many route requests this release's
// programmer has outstanding at once: Felix's route table makes one netlink
// call per route and waits for its answer (route_table.go, nl.RouteDel and
// nl.RouteReplace in loops, in all three releases), so 1. 0 means no limit
// of the release's own (birdcage's pipelined writer decides).
func (r Release) ProgrammerRequestsInFlight() int {
	if r.isCalicoRelease() {
		return 1
	}
	return 0
}

// OwnsBIRDIPIPRoutes reports whether a programmer of this release, when it
// owns the IPIP cluster routes, takes `proto bird` routes whose one device is
// the IPIP device as its own (so it deletes those it does not want). Only
// 3.33 has the rule (ownershippol/main_route_table_policy.go, the
// OwnBIRDIPIPRoutes field, absent on release-v3.31 and release-v3.32).
func (r Release) OwnsBIRDIPIPRoutes() bool { return r == R333 }

// OwnsProtocolOnAnyDevice reports whether a route with the programmer's
// route protocol is its own whatever its device (or with none). True in all
// three releases: the protocol Felix writes its IPIP, same-subnet and
// blackhole routes with (80 unless DeviceRouteProtocol names another) is an
// "exclusive" protocol, checked before any device test.
func (r Release) OwnsProtocolOnAnyDevice() bool { return r.isCalicoRelease() }

// IPIPRouteMTUOverhead is what Felix subtracts from the host's MTU for the
// MTU it puts on every IPIP tunnel route when FelixConfiguration.ipipMTU is
// unset (dataplane/linux/int_dataplane.go ConfigureDefaultMTUs, the same in
// all three releases). 0 means the release writes no MTU on IPIP routes.
func (r Release) IPIPRouteMTUOverhead() int {
	if !r.isCalicoRelease() {
		return 0
	}
	return 20
}

// NoEncapIPv4NeedsNoIPIP reports whether this release's Felix programs IPv4
// no-encap cluster routes only when no overlay (IPIP, VXLAN, WireGuard) is
// enabled: 3.31 and 3.32 start the no-encap manager under that condition
// (dataplane/linux/int_dataplane.go, "if config.ProgramClusterRoutes { if
// !VXLANEnabled && !IPIPEnabled && !WireguardEnabled"); 3.33 starts it when
// it owns no-encap routes and no-encap pools exist.
func (r Release) NoEncapIPv4NeedsNoIPIP() bool { return r == R331 || r == R332 }

// RestartsOnAnyFelixConfigChange reports whether this release's Felix exits
// to be restarted when any FelixConfiguration field's effective value
// changes (felix/daemon/daemon.go: every changed field but CalicoVersion,
// ClusterGUID, ClusterType and HealthTimeoutOverrides restarts it, in all
// three releases), routeRefreshInterval included.
func (r Release) RestartsOnAnyFelixConfigChange() bool { return r.isCalicoRelease() }

// RestartsOnNoEncapNeeded reports whether this release's Felix restarts
// when "no-encap needed" (no-encap pools exist and Felix owns their routes)
// changes: 3.33 compares NoEncapEnabled with it beside the IPIP and VXLAN
// flags (daemon.go, "IPIP, VXLAN and/or noencap encapsulation changed");
// 3.31 and 3.32 compare only IPIP and VXLAN.
func (r Release) RestartsOnNoEncapNeeded() bool { return r != R331 && r != R332 }

// isCalicoRelease reports whether r names one of Calico's releases whose
// Felix was read (3.31, 3.32, 3.33); any other profile keeps birdcage's
// earlier behaviour for the Felix-side choices above.
func (r Release) isCalicoRelease() bool { return r == R331 || r == R332 || r == R333 }
