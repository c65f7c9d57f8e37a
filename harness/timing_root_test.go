package harness

// These tests hold the timing model in place on a real cluster: the
// programmer's restart profile is what the process really does (a restart
// with a configured delay D leaves the node unprogrammed for D, give or take
// the exec), and confd reacts per node concurrently, or in turn when the
// model says so.

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/supervisor"
	"github.com/birdcage/birdcage/dataplane/timing"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/poll"
)

// restartTolerance bounds exit → first program − D. Both ends are
// CLOCK_MONOTONIC ns: the exit is stamped by the supervisor when wait4
// returns, the first program by the new process in its status file
// (firstProgramMonotonicNano, ns resolution), so the clocks' resolution adds
// nothing. What remains is the supervisor's fork/exec of the static binary
// up to its package initialisation (the profile's anchor; 1–3 ms seen here),
// the timer's wake-up and a status write: a few ms on an idle machine, more
// when the machine is shared (27 ms seen once in a CI run on 2 cores), so
// 50 ms: still far below what a wrong profile or a delay applied twice
// would add (300 ms and more in the cases below).
const restartTolerance = 50 * time.Millisecond

func crashAndWaitRestart(t *testing.T, c *Cluster) supervisor.Restart {
	t.Helper()
	n := c.Nodes()[0]
	before := len(n.Programmer.Restarts())
	// A crash is an exit the supervisor did not ask for.
	pid := n.Programmer.Pid()
	if pid <= 0 {
		t.Fatalf("%s's programmer is not running", n.Name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r supervisor.Restart
	if err := poll.Until(ctx, 5*time.Millisecond, func() bool {
		rs := n.Programmer.Restarts()
		if len(rs) <= before || rs[before].SyncedMono == 0 {
			return false
		}
		r = rs[before]
		return true
	}); err != nil {
		t.Fatalf("%s's programmer did not come back after a crash (log %s): %v", n.Name, n.Programmer.LogPath(), err)
	}
	return r
}

func TestProgrammerRestartProfile(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fixed    time.Duration
		perRoute time.Duration
	}{
		{"fixed 300ms", 300 * time.Millisecond, 0},
		{"fixed 1s", time.Second, 0},
		// Per route, a delay well past the process's own setup (its
		// datastore read and netlink handles before the timer, counted
		// from its start): at 40 ms × 2 routes a slow setup on a CI runner
		// could overrun D and read as a late first program.
		{"150ms per route", 0, 150 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := timing.Zero()
			m.ProgrammerStartupDelay, m.ProgrammerResyncPerRoute = tc.fixed, tc.perRoute
			c := startOrSkip(t, "noencap", Options{Timing: &m})
			r := crashAndWaitRestart(t, c)
			st, err := c.Nodes()[0].Programmer.Status()
			if err != nil {
				t.Fatal(err)
			}
			// The delay the process applied is the profile's for the
			// routes it wanted (guard: the per-route case wants some).
			want := tc.fixed + time.Duration(st.RoutesDesired)*tc.perRoute
			if tc.perRoute > 0 && st.RoutesDesired == 0 {
				t.Fatal("guard: the programmer wants no routes, so a per-route delay proves nothing")
			}
			if time.Duration(r.StartupDelayNs) != want {
				t.Errorf("the programmer applied a %s delay, want %s (%s + %d routes × %s)",
					time.Duration(r.StartupDelayNs), want, tc.fixed, st.RoutesDesired, tc.perRoute)
			}
			got := r.ToFirstProgram()
			t.Logf("D = %s: exit → process start %s, exit → first program %s, exit → first sync %s",
				want, time.Duration(r.ProcessStartMono-r.ExitMono), got, r.Duration())
			if got < want || got > want+restartTolerance {
				t.Errorf("exit → first program %s, want within [%s, %s + %s] (exit → process start %s)",
					got, want, want, restartTolerance, time.Duration(r.ProcessStartMono-r.ExitMono))
			}
		})
	}
	// The zero profile: whatever the process takes by itself, reported.
	t.Run("zero", func(t *testing.T) {
		m := timing.Zero()
		c := startOrSkip(t, "noencap", Options{Timing: &m})
		r := crashAndWaitRestart(t, c)
		if r.StartupDelayNs != 0 {
			t.Errorf("zero model applied a %s delay", time.Duration(r.StartupDelayNs))
		}
		t.Logf("natural restart: exit → process start %s, exit → first program %s, exit → first sync %s",
			time.Duration(r.ProcessStartMono-r.ExitMono), r.ToFirstProgram(), r.Duration())
	})
}

// With one confd per node every node's BIRD is reconfigured one latency
// after the change, at about the same time; with a single confd the nodes
// are reconfigured in turn, each a latency after the one before.
func TestConfdConcurrency(t *testing.T) {
	const latency = 300 * time.Millisecond
	for _, concurrent := range []bool{true, false} {
		name := map[bool]string{true: "one confd per node", false: "one confd in turn"}[concurrent]
		t.Run(name, func(t *testing.T) {
			m := timing.Zero()
			m.ConfdLatency, m.ConfdConcurrent = latency, concurrent
			watchesBefore := ownInotifyInstances(t)
			c := startOrSkip(t, "noencap", Options{Timing: &m})
			// However many confds, the harness holds one datastore watch
			// (one inotify instance): the user's instance budget is left to
			// the programmers, one each.
			if got := ownInotifyInstances(t) - watchesBefore; got != 1 {
				t.Errorf("the harness holds %d more inotify instances with %d nodes' confds running, want 1", got, len(c.Nodes()))
			}
			before := map[string]int{}
			for _, n := range c.Nodes() {
				before[n.Name] = len(n.ConfdActions())
			}
			// A change every node's config reflects: BIRD's kernel metric.
			cl, err := c.Store.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			b := cl.BGP
			metric := 32
			b.KernelMetric = &metric
			change := monoclock.Now()
			if err := c.Store.Put(datastore.KindBGPConfiguration, datastore.SingletonName, b); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var at []int64
			if err := poll.Until(ctx, 10*time.Millisecond, func() bool {
				at = at[:0]
				for _, n := range c.Nodes() {
					as := n.ConfdActions()
					if len(as) <= before[n.Name] {
						return false
					}
					at = append(at, as[before[n.Name]].ConfiguredMono)
				}
				return true
			}); err != nil {
				t.Fatalf("not every node's BIRD was reconfigured: %v", err)
			}
			for i, a := range at {
				d := time.Duration(a - change)
				t.Logf("node %d reconfigured %s after the change", i+1, d.Round(time.Millisecond))
				min := latency
				if !concurrent {
					min = time.Duration(i+1) * latency
				}
				if d < min {
					t.Errorf("node %d reconfigured %s after the change, before the model allows (%s)", i+1, d, min)
				}
			}
			spread := time.Duration(at[len(at)-1] - at[0])
			if concurrent && (spread >= latency || spread <= -latency) {
				t.Errorf("concurrent confds: first and last node %s apart, want well under one latency (%s)", spread, latency)
			}
		})
	}
}

// ownInotifyInstances counts this process's inotify instances.
func ownInotifyInstances(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "anon_inode:inotify" {
			n++
		}
	}
	return n
}
