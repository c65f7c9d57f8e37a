package timeline

// Sync holds the claim the spec's marks rely on: an instant taken once Sync
// returned is later than the recorded stamp of every route change the kernel
// made before Sync was called. Without it a mark taken straight after a burst
// of changes lands before the monitor has read the last of them, and the
// replay shows windows the kernel never had (stop 34's kernel-metric flake).

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/procfs"
	"github.com/birdcage/birdcage/internal/testenv"
	"golang.org/x/sys/unix"
)

// burst adds n /32 routes in 10.70.0.0/16 via v0, one request each, and
// returns the prefixes.
func (nd *node) burst(t *testing.T, n int) []netip.Prefix {
	t.Helper()
	ps := make([]netip.Prefix, 0, n)
	for i := range n {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 70, byte(i >> 8), byte(i)}), 32)
		r := nd.route(p.String(), kroute.ProtoStatic, 0, "v0", "")
		if err := nd.h.RouteAdd(r); err != nil {
			t.Fatalf("add %s: %v", p, err)
		}
		ps = append(ps, p)
	}
	return ps
}

// recorded counts the prefixes with an add recorded in [from, at].
func (nd *node) recorded(ps []netip.Prefix, from, at int64) int {
	want := map[netip.Prefix]bool{}
	for _, p := range ps {
		want[p] = true
	}
	n := 0
	for _, e := range nd.mon.Events() {
		if e.Kind == event.Add && want[e.Route.Dst] && e.At >= from && e.At <= at {
			delete(want, e.Route.Dst)
			n++
		}
	}
	return n
}

func TestSyncRecordsEveryChangeMadeBeforeIt(t *testing.T) {
	nd := newNode(t)
	const n = 1500
	lagged := 0
	for round := range 4 {
		// The monitor's loop is held (it records under mu) while the
		// burst is made, as a loaded machine holds it: its notifications
		// queue, and the instant straight after the burst, unsynced, is
		// the control: it must miss some of them.
		from := monoclock.Now()
		nd.mon.mu.Lock()
		ps := nd.burst(t, n)
		nd.mon.mu.Unlock()
		unsynced := nd.recorded(ps, from, monoclock.Now())
		if unsynced < n {
			lagged++
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := Sync(ctx, nd.mon)
		cancel()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		mark := monoclock.Now()
		if got := nd.recorded(ps, from, mark); got != n {
			t.Fatalf("round %d: a mark taken after Sync is before the stamps of %d of the %d adds made before it", round, n-got, n)
		}
		t.Logf("round %d: %d of %d adds recorded at an unsynced instant straight after the burst, %d after Sync", round, unsynced, n, n)
		for _, p := range ps {
			if err := nd.h.RouteDel(nd.route(p.String(), kroute.ProtoStatic, 0, "v0", "")); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The guard: the race Sync closes must have been there to close at
	// least once, or this test shows nothing about Sync.
	if lagged == 0 {
		t.Fatalf("in none of 4 bursts of %d adds was the monitor behind at the instant after the burst: the control never saw the race", n)
	}
	if errs := nd.mon.Errors(); len(errs) != 0 {
		t.Errorf("Sync's tokens were recorded as subscription errors: %v", errs)
	}
}

// Two monitors of one namespace (the process has two subscriptions there):
// each takes its own token, ignores the other's, and neither records a token
// as an error or an event.
func TestSyncTwoMonitorsOfOneNamespace(t *testing.T) {
	nd := newNode(t)
	other, err := Start(Options{Name: "tl-2", Netns: nd.path})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	before := len(nd.mon.Events()) + len(other.Events())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, ms := range [][]*Monitor{{nd.mon}, {other}, {nd.mon, other}} {
		if err := Sync(ctx, ms...); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
	if after := len(nd.mon.Events()) + len(other.Events()); after != before {
		t.Errorf("Sync recorded %d events; a token is not a route change", after-before)
	}
	for _, m := range []*Monitor{nd.mon, other} {
		if errs := m.Errors(); len(errs) != 0 {
			t.Errorf("%s recorded Sync's tokens as subscription errors: %v", m.Name(), errs)
		}
	}
	// A closed monitor is skipped, not waited for.
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if err := Sync(short, other, nd.mon); err != nil {
		t.Errorf("Sync with a closed monitor: %v", err)
	}
}

// BenchmarkSync is the cost a mark pays for one node's timeline: the
// descriptor scan, a token socket, the round trip through the monitor's loop.
func BenchmarkSync(b *testing.B) {
	n := testenv.NewNetNS(b, "tlb")
	m, err := Start(Options{Name: "tlb", Netns: n.NS.Path()})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := Sync(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}

// The route subscription's receive buffer is forced past net.core.rmem_max
// (a18da70: the Debian guest's 208 KiB held a few hundred notifications and
// pipelineMessages assumes what the monitor asked for). The monitor hides
// its socket, so the test finds it as Sync does.
func TestRouteSubscriptionBufferIsForcedPastRmemMax(t *testing.T) {
	rmemMax, err := procfs.SysctlInt("net.core.rmem_max")
	if err != nil {
		t.Fatal(err)
	}
	ask := 4 * rmemMax
	// The control: on this machine an unforced socket asking as much is
	// capped at rmem_max (the kernel reports twice what it keeps).
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, ask); err != nil {
		t.Fatal(err)
	}
	if capped, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF); capped >= 2*ask {
		t.Fatalf("control: an unforced socket got %d bytes for %d asked with rmem_max %d: the cap is not there to test", capped, ask, rmemMax)
	}

	n := testenv.NewNetNS(t, "tlbuf")
	m, err := Start(Options{Name: "tlbuf", Netns: n.NS.Path(), ReceiveBuffer: ask})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	subs, err := routeSubscriptions()
	if err != nil {
		t.Fatal(err)
	}
	var found []int
	for _, s := range subs {
		if s.ns == m.nsID {
			got, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
			if err != nil {
				t.Fatal(err)
			}
			found = append(found, got)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want the monitor's one route subscription in its namespace, found %d", len(found))
	}
	if found[0] < 2*ask {
		t.Errorf("the route subscription's buffer is %d bytes; asked %d past rmem_max %d, forced it would be %d", found[0], ask, rmemMax, 2*ask)
	}
}

// A monitor that does not read (its loop held while a burst overruns its
// small subscription): Sync ends at its context's end with an error naming
// the monitor, and a mark with it, instead of waiting for the monitor.
func TestSyncEndsWithItsContextOnAMonitorThatDoesNotRead(t *testing.T) {
	nd := newNode(t)
	small, err := Start(Options{Name: "tl-small", Netns: nd.path, ReceiveBuffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	// Hold both loops (records under mu) while the burst fills each
	// subscription's channel and then its socket.
	small.mu.Lock()
	nd.mon.mu.Lock()
	nd.burst(t, 5000)
	nd.mon.mu.Unlock()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		done <- Sync(ctx, small)
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "tl-small") {
			t.Errorf("Sync on a monitor that does not read: want an error naming it, got %v", err)
		}
		t.Logf("Sync returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(5 * time.Second):
		small.mu.Unlock()
		t.Fatal("Sync waited for a monitor that does not read past its context")
	}
	small.mu.Unlock()
	// The control: the other monitor, with its default buffer and its loop
	// running, takes its token.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Sync(ctx, nd.mon); err != nil {
		t.Errorf("control: %v", err)
	}
}
