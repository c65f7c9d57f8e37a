// Package release names the BIRD releases birdcage can run and what each
// can express. It holds no paths and runs nothing: dataplane/bird finds a
// release's root filesystem, dataplane/confd renders for its major.
package release

import (
	"fmt"
	"strings"
)

// Name is a BIRD release as birdcage names it: major.minor ("1.6", "2.0",
// "2.17", "3.1"). The Debian package behind each is fixed by ci/bird-releases.
type Name string

// The releases ci/bird-releases prepares.
const (
	// BIRD16 is Debian bookworm's `bird` 1.6.8: upstream 1.6, the base of
	// Calico's fork. Two daemons (bird for IPv4, bird6 for IPv6), no
	// channels, no onlink for tunnel routes, kernel metric 0 by default.
	BIRD16 Name = "1.6"
	// BIRD20 is bookworm's `bird2` 2.0.12, the host's BIRD and the default.
	BIRD20 Name = "2.0"
	// BIRD217 is trixie's `bird2` 2.17.x.
	BIRD217 Name = "2.17"
	// BIRD31 is trixie's `bird3` 3.1.x.
	BIRD31 Name = "3.1"
)

// Default is the release a node runs unless told otherwise: the host's
// bird2 (Debian package), which needs no prepared root filesystem.
const Default = BIRD20

// All lists the known releases, oldest first.
var All = []Name{BIRD16, BIRD20, BIRD217, BIRD31}

// Parse accepts a known release ("" means Default). The error lists the
// known ones.
func Parse(s string) (Name, error) {
	if s == "" {
		return Default, nil
	}
	for _, n := range All {
		if string(n) == s {
			return n, nil
		}
	}
	known := make([]string, len(All))
	for i, n := range All {
		known[i] = string(n)
	}
	return "", fmt.Errorf("BIRD release %q: unknown (known: %s)", s, strings.Join(known, ", "))
}

// Major is the release's major version (1, 2 or 3).
func (n Name) Major() int {
	switch {
	case strings.HasPrefix(string(n), "1."):
		return 1
	case strings.HasPrefix(string(n), "3."):
		return 3
	default:
		return 2
	}
}

// Feature is the name a test skips with when the release is not prepared
// ("bird-2.17"), for internal/testenv.
func (n Name) Feature() string { return "bird-" + string(n) }

// TwoDaemons reports whether IPv4 and IPv6 run as separate daemons with
// separate configs (bird and bird6), as in 1.x; 2.x and 3.x run one daemon
// with a channel per address family.
func (n Name) TwoDaemons() bool { return n.Major() == 1 }

// TunnelRoutes reports whether a kernel export filter can turn a BGP route
// into a tunnel route (`onlink = true; ifname = "tunl0"; gw = ...`), which
// is how upstream BIRD replaces the fork's krt_tunnel. If not, the reason.
func (n Name) TunnelRoutes() (bool, string) {
	switch n.Major() {
	case 1:
		return false, "upstream BIRD 1.6 has no onlink route attribute (only Calico's fork adds krt_tunnel), so it cannot program IPIP tunnel routes"
	case 3:
		return false, "BIRD 3.1's filters have no onlink route attribute (a filter cannot mark a next hop on-link; bird -p rejects `onlink = true`), so it cannot program IPIP tunnel routes"
	}
	return true, ""
}

// DefaultKernelMetric is the metric the kernel protocol writes routes at
// when the config sets none: 0 on 1.x, 32 on 2.x and 3.x.
func (n Name) DefaultKernelMetric() int {
	if n.Major() == 1 {
		return 0
	}
	return 32
}

// MsTimeFormat reports whether `timeformat ... iso long ms` parses (not on 1.x).
func (n Name) MsTimeFormat() bool { return n.Major() != 1 }

// bundleSep joins a 1.x node's two configs into the one byte string a
// node's BIRD is handed (a BIRD comment line, unlikely in a config).
const bundleSep = "\n# ---- birdcage: bird6.conf follows (BIRD 1.x runs one daemon per address family) ----\n"

// Bundle joins BIRD 1.x's bird.conf and bird6.conf into what a two-daemon
// node's BIRD is configured with (dataplane/bird splits it again).
func Bundle(conf4, conf6 []byte) []byte {
	out := append([]byte(nil), conf4...)
	out = append(out, bundleSep...)
	return append(out, conf6...)
}

// Split undoes Bundle; ok is false when b is a single config.
func Split(b []byte) (conf4, conf6 []byte, ok bool) {
	s := string(b)
	i := strings.Index(s, bundleSep)
	if i < 0 {
		return b, nil, false
	}
	return []byte(s[:i]), []byte(s[i+len(bundleSep):]), true
}
