// Package config owns the one fact both route programmers must agree on: what
// each value of programClusterRoutes means, and what an unset or unknown value
// defaults to in each release. The programmer reads FelixConfiguration through
// it and the confd-equivalent reads BGPConfiguration through it, so a change to
// the enum here changes both sides at once.
//
// Nothing outside this package compares the raw string; use the accessors.
package config

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// ProgramClusterRoutes names the classes of IP pool whose cluster routes a
// component programs into the kernel.
type ProgramClusterRoutes string

const (
	Disabled           ProgramClusterRoutes = "Disabled"
	EnabledIPIPOnly    ProgramClusterRoutes = "EnabledIPIPOnly"
	EnabledNoEncapOnly ProgramClusterRoutes = "EnabledNoEncapOnly"
	Enabled            ProgramClusterRoutes = "Enabled"
)

// Values lists the four valid values in a stable order.
var Values = []ProgramClusterRoutes{Disabled, EnabledIPIPOnly, EnabledNoEncapOnly, Enabled}

// ValidValues is Values joined for error messages.
func ValidValues() string {
	s := make([]string, len(Values))
	for i, v := range Values {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// Valid reports whether v is one of the four values.
func (v ProgramClusterRoutes) Valid() bool {
	for _, x := range Values {
		if v == x {
			return true
		}
	}
	return false
}

// ProgramIPIPClusterRoutes reports whether the component owns the cluster
// routes of IPIP pools.
func (v ProgramClusterRoutes) ProgramIPIPClusterRoutes() bool {
	return v == EnabledIPIPOnly || v == Enabled
}

// ProgramNoEncapClusterRoutes reports whether the component owns the cluster
// routes of pools with neither IPIP nor VXLAN.
func (v ProgramClusterRoutes) ProgramNoEncapClusterRoutes() bool {
	return v == EnabledNoEncapOnly || v == Enabled
}

// Component is which side of the split a value is read for.
type Component string

const (
	Programmer Component = "programmer" // Felix's role: FelixConfiguration
	BIRD       Component = "bird"       // confd+BIRD's role: BGPConfiguration
)

// Release is a named profile of defaults and behaviours, so that an upgrade
// can be replayed node by node.
type Release string

const (
	// Pre333: the programmer owns no cluster routes, BIRD owns all, and the
	// programmer never claims BIRD's routes.
	Pre333 Release = "pre-3.33"
	// R333: the programmer owns IPIP, BIRD owns no-encap, and the programmer
	// claims `proto bird` routes via tunl0 when it owns IPIP.
	R333 Release = "3.33"
	// R331 and R332 name Calico's releases 3.31 and 3.32. They are declared
	// here so that the confd side and the programmer side of the release
	// profiles can be built apart; they join Releases when their behaviour
	// is defined.
	R331 Release = "3.31"
	R332 Release = "3.32"
)

// Releases lists the known releases, oldest first.
var Releases = []Release{Pre333, R333}

// ParseRelease returns the named release or an error listing the valid names.
func ParseRelease(s string) (Release, error) {
	for _, r := range Releases {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("release %q: valid releases are %s", s, strings.Join(releaseNames(), ", "))
}

func releaseNames() []string {
	s := make([]string, len(Releases))
	for i, r := range Releases {
		s[i] = string(r)
	}
	return s
}

// DefaultProgramClusterRoutes is what a component of this release does when
// its field is unset.
func (r Release) DefaultProgramClusterRoutes(c Component) ProgramClusterRoutes {
	switch {
	case r == Pre333 && c == Programmer:
		return Disabled
	case r == Pre333 && c == BIRD:
		return Enabled
	case c == Programmer:
		return EnabledIPIPOnly
	default:
		return EnabledNoEncapOnly
	}
}

// ClaimsBIRDTunnelRoutes reports whether a programmer of this release treats
// `proto bird` routes via tunl0 as its own when it owns IPIP cluster routes.
func (r Release) ClaimsBIRDTunnelRoutes() bool { return r != Pre333 }

// WarnsOnBIRDIPIP reports whether confd of this release logs the deprecation
// warning when BIRD programs an IPIP pool's routes.
func (r Release) WarnsOnBIRDIPIP() bool { return r != Pre333 }

// Resolve turns a raw field value into the effective value for a component of
// a release. Unset and unknown values resolve identically, to the release
// default, so two components that disagree about the enum still agree about
// what to do; an unknown value is logged.
func Resolve(raw string, r Release, c Component, log *slog.Logger) ProgramClusterRoutes {
	v := ProgramClusterRoutes(raw)
	if v.Valid() {
		return v
	}
	def := r.DefaultProgramClusterRoutes(c)
	if raw != "" && log != nil {
		log.Warn("unknown programClusterRoutes value; using the release default",
			"component", c, "value", raw, "default", def, "valid", ValidValues())
	}
	return def
}

// DefaultDeviceRouteProtocol is the kernel route protocol the programmer
// writes (Felix's DeviceRouteProtocol default). It is the programmer's own
// number on purpose, not kroute.ProtoCalicoDefault: that one is the
// harness's, the judge's, and a wrong default here must not move the
// judgement with it.
const DefaultDeviceRouteProtocol = 80

// DefaultRouteRefreshInterval is how often the programmer re-reads the kernel
// and fixes drift (Felix's RouteRefreshInterval default). Scenarios set it
// shorter.
const DefaultRouteRefreshInterval = 90 * time.Second

// EffectiveDeviceRouteProtocol returns the protocol a programmer writes for a
// FelixConfiguration.deviceRouteProtocol value; 0 (unset) gives the default.
func EffectiveDeviceRouteProtocol(v int) int {
	if v == 0 {
		return DefaultDeviceRouteProtocol
	}
	return v
}

// EffectiveRouteRefreshInterval returns the refresh interval for a
// FelixConfiguration.routeRefreshInterval value: "" gives the default, "0s"
// disables the periodic refresh (returns 0).
func EffectiveRouteRefreshInterval(s string) (time.Duration, error) {
	if s == "" {
		return DefaultRouteRefreshInterval, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("routeRefreshInterval %q: %w", s, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("routeRefreshInterval %q: negative", s)
	}
	return d, nil
}
