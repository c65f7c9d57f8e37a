// Package testenv decides what a test does when the machine lacks something:
// skip, naming the missing feature, or — where the run promised that feature
// (the VM runner sets $BIRDCAGE_REQUIRE=ipip) — fail, so a spec meant to run
// under the VM can never pass by skipping.
//
// It is the environment's edge for the test packages that have no other
// (Env): their helpers read the knobs from it, never from os.Getenv.
package testenv

import (
	"errors"
	"os"
	"strings"
	"sync"

	"github.com/birdcage/birdcage/internal/env"
)

// Env is the test process's knobs (internal/env), loaded once. A bad value
// panics with the error Load names it with: a test binary run with a typo
// in its environment stops at once instead of running another test than
// the one asked for.
var Env = sync.OnceValue(func() env.Config {
	c, err := env.LoadOS()
	if err != nil {
		panic("test environment: " + err.Error())
	}
	return c
})

// Feature names.
const (
	// IPIP is a tunl0 for IPIP pools, by either means: the kernel's ipip
	// module or the eBPF emulation (topo.TunnelEBPF).
	IPIP = "ipip"
	// KernelIPIP is the kernel's own ipip module, for the tests that hold
	// the emulation against it (the VM stage promises it; natively only a
	// kernel with the module has it).
	KernelIPIP = "ipip-module"
	Root       = "root"
	// Calico is a Calico build for the calico node flavour: a directory
	// laid out like the calico/node image's root filesystem
	// ($BIRDCAGE_CALICO).
	Calico = "calico"
	// Docker is docker or podman with a running daemon (podman needs
	// none), to export a container image as a calico source.
	Docker = "docker"
)

// TB is the part of testing.TB (and of Ginkgo's GinkgoT) this needs.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Required reports whether the environment promised the feature.
func Required(feature string) bool { return Env().Required(feature) }

// Missing skips the test with the missing feature and why, or fails it when
// the environment promised the feature.
func Missing(t TB, feature, why string) {
	t.Helper()
	if Required(feature) {
		t.Fatalf("missing %s although %s=%s promised it: %s", feature, env.Require, strings.Join(Env().Require, ","), why)
	}
	t.Skipf("missing kernel/host feature %s: %s", feature, why)
}

// NeedRoot skips (or fails, if promised) when not running as root.
func NeedRoot(t TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, Root, "needs root for network namespaces and netlink (sudo go test ...)")
	}
}

// FeatureError is implemented by errors that mean "this machine lacks a
// feature" (topo.ErrNoIPIP: the kernel has no ipip), so tests can map any
// of them to Missing in one place.
type FeatureError interface {
	error
	MissingFeature() string
}

// SkipIfMissing calls Missing when err (or an error it wraps) is a
// FeatureError, naming what needed the feature; other errors, and nil, are
// left to the caller.
func SkipIfMissing(t TB, err error, what string) {
	t.Helper()
	var fe FeatureError
	if errors.As(err, &fe) {
		Missing(t, fe.MissingFeature(), what+": "+err.Error())
	}
}
