package judge

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/instrument/timeline"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/testenv"
)

// KeepRouteThroughout against real route monitors in one namespace: one
// with the smallest receive buffer, flooded with route adds until its
// subscription overflows (ENOBUFS), records the gap, and the matcher over a
// span containing it is unjudgeable; one with the default buffer, which
// kept up (the positive control), judges the same span clean.
func TestKeepRouteThroughoutFailsOverARealGap(t *testing.T) {
	n := testenv.NewNetNS(t, "tg")
	dev := n.Veth(t, "v0", "v0p", "10.50.0.1/24")
	start := func(name string, rcv int) *timeline.Monitor {
		m, err := timeline.Start(timeline.Options{Name: name, Netns: n.NS.Path(), ReceiveBuffer: rcv})
		if err != nil {
			t.Fatal(err)
		}
		n.Run.Defer("route timeline "+name, m.Close)
		return m
	}
	small, keeper := start("small", 4096), start("keeper", 0)
	route := func(dst netip.Prefix) *netlink.Route {
		_, ipn, _ := net.ParseCIDR(dst.String())
		return &netlink.Route{Dst: ipn, Gw: net.ParseIP("10.50.0.2"), LinkIndex: dev.Attrs().Index,
			Protocol: netlink.RouteProtocol(kroute.ProtoCalicoDefault), Table: kroute.MainTable}
	}
	p := netip.MustParsePrefix("10.60.0.0/24")
	if err := n.Handle.RouteAdd(route(p)); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*timeline.Monitor{small, keeper} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := m.WaitFor(ctx, func(e event.Event) bool { return e.Route.Dst == p && e.Kind == event.Add })
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	from := monoclock.Now()

	// Flood from two handles at once, in rounds, until the small monitor
	// records a gap (its reader cannot keep up with an 8 KiB buffer).
	nsh, err := netns.GetFromPath(n.NS.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	var gaps []event.Gap
	added := 0
	for round := 0; round < 10 && len(gaps) == 0; round++ {
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h, err := netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
				if err != nil {
					errs <- err
					return
				}
				defer h.Close()
				for i := range 2000 {
					k := round*4000 + w*2000 + i
					dst := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + k/65536), byte(k / 256 % 256), byte(k % 256)}), 32)
					if err := h.RouteAdd(route(dst)); err != nil {
						errs <- fmt.Errorf("add %s: %w", dst, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		added += 4000
		// The watched route is deleted and re-added in the flood's wake.
		if err := n.Handle.RouteDel(route(p)); err != nil {
			t.Fatal(err)
		}
		if err := n.Handle.RouteAdd(route(p)); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for len(gaps) == 0 && time.Now().Before(deadline) {
			gaps = small.Gaps()
			<-time.After(20 * time.Millisecond) // polling interval
		}
	}
	if len(gaps) == 0 {
		t.Fatalf("no subscription gap after %d route adds with an 8 KiB buffer: the test did not force one", added)
	}
	// Wait for the gap to close (re-subscribed), then judge a span that
	// contains it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := small.WaitFor(ctx, func(e event.Event) bool { return e.Kind == event.GapKind }); err != nil {
		t.Fatal(err)
	}
	// The keeper reads the flood's backlog before it reaches the watched
	// route's delete and re-add: wait until it has.
	if _, err := keeper.WaitFor(ctx, func(e event.Event) bool {
		return e.Kind == event.Add && e.Route.Dst == p && e.At > from
	}); err != nil {
		t.Fatal(err)
	}
	to := monoclock.Now()
	t.Logf("after %d adds: %s; errors %d", added, small.Gaps()[0], len(small.Errors()))

	m := KeepRouteThroughout(p, from, to)
	ok, err := m.Match(small)
	if ok || err == nil || !strings.Contains(err.Error(), "unjudgeable: the route monitor missed events from") || !strings.Contains(err.Error(), "on node small") {
		t.Fatalf("over the gap: ok %v, err %v; want unjudgeable", ok, err)
	}
	// The monitor that kept up saw the delete and re-add: a real failure
	// of the claim, judged (not unjudgeable).
	if gs := keeper.Gaps(); len(gs) != 0 {
		t.Skipf("the default-buffer monitor overflowed too (%v): no control this run", gs)
	}
	m = KeepRouteThroughout(p, from, to)
	if ok, err := m.Match(keeper); ok || err != nil || !strings.Contains(m.FailureMessage(keeper), "deleted at") {
		t.Fatalf("keeper: ok %v err %v msg %s; want a judged failure naming the delete", ok, err, m.FailureMessage(keeper))
	}
	// Positive control: over a span after the flood, with no delete, the
	// keeper judges the route kept.
	after := monoclock.Now()
	if ok, err := KeepRouteThroughout(p, after, 0).Match(keeper); !ok || err != nil {
		t.Fatalf("keeper after the flood: ok %v err %v", ok, err)
	}
}
