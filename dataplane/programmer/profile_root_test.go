// This root test holds the restart profile of the process contract in
// place: with --startup-delay and --resync-delay-per-route the binary writes
// nothing to the kernel until the profile's delay has passed since it
// started, says so in its status file, and refuses a bad value.
package programmer_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/programmer"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/env"
)

func TestRestartProfileFlags(t *testing.T) {
	nd := newNode(t)
	bin := programmerBinary(t)
	dir := nd.r.Path("datastore")
	status := nd.r.Path("programmer.status.json")
	st, err := datastore.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		kind datastore.Kind
		name string
		doc  any
	}{
		{datastore.KindIPPool, "ipip", datastore.IPPool{CIDR: "10.65.0.0/16", IPIPMode: "Always"}},
		{datastore.KindNode, "node-1", datastore.Node{IPv4Address: "10.0.1.11/24"}},
		{datastore.KindNode, "node-2", datastore.Node{IPv4Address: "10.0.1.12/24"}},
		{datastore.KindBlockAffinity, "b1", datastore.BlockAffinity{CIDR: "10.65.1.0/26", Node: "node-1"}},
		{datastore.KindBlockAffinity, "b2", datastore.BlockAffinity{CIDR: "10.65.2.0/26", Node: "node-2"}},
		{datastore.KindFelixConfiguration, "", datastore.FelixConfiguration{RouteRefreshInterval: "2s"}},
	} {
		if err := st.Put(d.kind, d.name, d.doc); err != nil {
			t.Fatal(err)
		}
	}

	// 1. Bad values are refused with the usage exit code, flag or env.
	for _, tc := range []struct {
		args []string
		env  string
	}{
		{[]string{"--startup-delay", "-1s"}, ""},
		{nil, env.Set(env.ProgrammerStartupDelay, "soon")},
		{nil, env.Set(env.ProgrammerResyncDelayPerRoute, "-5ms")},
		{[]string{"--write-order", "sideways"}, ""},
		{nil, env.Set(env.ProgrammerWriteOrder, "sideways")},
	} {
		cmd := exec.Command(bin, append([]string{"--node", "node-1", "--datastore", dir}, tc.args...)...)
		cmd.Env = append(os.Environ(), tc.env)
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != programmer.ExitUsage {
			t.Errorf("args %v env %q: %v, want exit %d", tc.args, tc.env, err, programmer.ExitUsage)
		}
	}

	// 2. A profile by flag (the env's value is overridden): nothing is
	// programmed during the delay, which the status file reports.
	const fixed, perRoute = 600 * time.Millisecond, 100 * time.Millisecond
	t.Setenv(env.ProgrammerStartupDelay, "10s") // the flag must win
	p := nd.start(t, bin, dir, status, "--startup-delay", fixed.String(), "--resync-delay-per-route", perRoute.String())
	var during programmer.Status
	eventually(t, 10*time.Second, "the delay announced in the status", func() string {
		s, err := programmer.ReadStatus(status)
		if err != nil || s.StartupDelayNano == 0 {
			return fmt.Sprintf("status %+v %v", s, err)
		}
		during = s
		return ""
	})
	if during.State == programmer.StateStarting && nd.route(t, "10.65.2.0/26") != "" {
		t.Errorf("a route was programmed during the restart profile's delay: %s", nd.route(t, "10.65.2.0/26"))
	}
	eventually(t, 10*time.Second, "first sync", func() string {
		s, err := programmer.ReadStatus(status)
		if err != nil || s.State != programmer.StateRunning || s.FirstSyncMonotonicNano == 0 {
			return fmt.Sprintf("status %+v %v", s, err)
		}
		return ""
	})
	s, _ := programmer.ReadStatus(status)
	want := fixed + time.Duration(s.RoutesDesired)*perRoute
	if s.RoutesDesired == 0 {
		t.Fatal("guard: no desired routes, so the per-route part proves nothing")
	}
	if time.Duration(s.StartupDelayNano) != want {
		t.Errorf("status says a %s delay, want %s + %d × %s = %s", time.Duration(s.StartupDelayNano), fixed, s.RoutesDesired, perRoute, want)
	}
	if got := time.Duration(s.FirstProgramMonotonicNano - s.StartedMonotonicNano); got < want {
		t.Errorf("first programming pass %s after start, before the %s delay", got, want)
	}
	if r := nd.route(t, "10.65.2.0/26"); r != "proto 80 via 10.0.1.12 dev tunl0" {
		t.Errorf("after the delay 10.65.2.0/26 is %q", r)
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Errorf("exit %d after SIGINT", code)
	}
}
