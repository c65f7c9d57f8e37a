package timeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/kroute/nlroute"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Options names the namespace to watch.
type Options struct {
	Name  string // for messages and reports, e.g. "node-2"
	Netns string // path of the network namespace
	// ReceiveBuffer is the route subscription's socket receive buffer in
	// bytes; 0 means 4 MiB. Tests make it small to force ENOBUFS.
	ReceiveBuffer int
}

// Monitor records every route change in one network namespace from Start
// until Close.
type Monitor struct {
	name, path string
	nsh        netns.NsHandle
	nsID       nsID // the namespace's identity, where Sync finds the subscription
	h          *netlink.Handle
	startedAt  int64
	rcvBuf     int
	synthetic  bool // Synthetic: holds events, records nothing

	mu       sync.Mutex
	events   []event.Event
	state    map[key]kroute.Route
	synthDel map[key]bool // deletes seen by resync whose notification may still come
	devs     map[int]linkInfo
	errs     []string
	// The current subscription: when it was established, and when the
	// loop took each of the last notifications of its two sockets (where a
	// gap can start: stampRing).
	subAt               int64
	lastRoute, lastLink stampRing
	openGap             *event.Gap    // a subscription ended; not re-established yet
	changed             chan struct{} // closed and replaced on every recorded event
	redump              chan struct{} // a subscription's own dump was interrupted: re-read

	stop     chan struct{}
	finished chan struct{}
	subDone  chan struct{}
}

type linkInfo struct {
	name string
	up   bool
}

// Start opens the namespace, subscribes to route and link notifications,
// reads the existing routes and returns once it is recording. The monitor
// keeps the namespace open until Close, so it survives the namespace losing
// its name and interfaces coming and going.
func Start(o Options) (*Monitor, error) {
	what := fmt.Sprintf("route timeline %s (%s)", o.Name, o.Netns)
	n, err := ns.GetNS(o.Netns)
	if err != nil {
		return nil, fmt.Errorf("%s: open netns: %w", what, err)
	}
	// Own a dup of the fd: ns.NetNS's Close must not pull it from under the
	// subscriptions.
	fd, err := unix.Dup(int(n.Fd()))
	n.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: dup netns fd: %w", what, err)
	}
	nsh := netns.NsHandle(fd)
	id, err := nsIDOf(fd)
	if err != nil {
		nsh.Close()
		return nil, fmt.Errorf("%s: stat netns: %w", what, err)
	}
	h, err := netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
	if err != nil {
		nsh.Close()
		return nil, fmt.Errorf("%s: netlink handle: %w", what, err)
	}
	rcv := o.ReceiveBuffer
	if rcv <= 0 {
		rcv = 4 << 20
	}
	m := &Monitor{
		name: o.Name, path: o.Netns, nsh: nsh, nsID: id, h: h, rcvBuf: rcv,
		state:    map[key]kroute.Route{},
		synthDel: map[key]bool{},
		devs:     map[int]linkInfo{},
		changed:  make(chan struct{}),
		redump:   make(chan struct{}, 1),
		stop:     make(chan struct{}),
		finished: make(chan struct{}),
	}
	routes, links, err := m.subscribe(true)
	if err != nil {
		h.Close()
		nsh.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	go m.loop(routes, links)
	return m, nil
}

// subscribe starts route and link subscriptions and then reads the links and
// the route tables. The subscriptions come first so nothing between the dump
// and the first notification is missed; a notification already reflected in
// the dump is recognised as a no-op or a replace of an identical route. The
// monitor makes its dumps itself (nsutil.Dump, which retries a dump that
// concurrent changes interrupted) rather than asking the link subscription
// to list existing links: that listing reports an interrupted dump only as an
// error callback, with no way to redo it.
func (m *Monitor) subscribe(first bool) (chan netlink.RouteUpdate, chan netlink.LinkUpdate, error) {
	done := make(chan struct{})
	routes := make(chan netlink.RouteUpdate, 4096)
	links := make(chan netlink.LinkUpdate, 256)
	nsh := m.nsh
	if err := netlink.RouteSubscribeWithOptions(routes, done, netlink.RouteSubscribeOptions{
		Namespace: &nsh,
		ErrorCallback: func(err error) {
			if !m.takeToken(routes, err) {
				m.onSubscriptionError(err)
			}
		},
		// Forced past net.core.rmem_max (208 KiB in the Debian guest),
		// as pipelineMessages assumes.
		ReceiveBufferSize:      m.rcvBuf,
		ReceiveBufferForceSize: true,
	}); err != nil {
		close(done)
		return nil, nil, fmt.Errorf("subscribe to routes: %w", err)
	}
	if err := netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{
		Namespace:     &nsh,
		ErrorCallback: m.onSubscriptionError,
	}); err != nil {
		close(done)
		return nil, nil, fmt.Errorf("subscribe to links: %w", err)
	}
	m.subDone = done
	if err := m.readLinks(); err != nil {
		close(done)
		return nil, nil, err
	}
	if err := m.readTables(first); err != nil {
		close(done)
		return nil, nil, err
	}
	now := monoclock.Now()
	m.mu.Lock()
	m.subAt = now
	m.lastRoute.reset(pipelineMessages(cap(routes), m.rcvBuf))
	m.lastLink.reset(pipelineMessages(cap(links), linkRcvBufMax))
	m.mu.Unlock()
	return routes, links, nil
}

// readTables dumps every route of both families. At start it records them as
// Existing; on a resync it records a Resync delete for every route the
// monitor believed present that the kernel no longer has. It never
// synthesises adds: the kernel announces every add.
func (m *Monitor) readTables(first bool) error {
	var all []netlink.Route
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		// An interrupted dump comes back empty or partial; taking it
		// would turn every route missing from it into a Resync delete.
		rs, err := nsutil.Routes(m.h, fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return fmt.Errorf("list routes: %w", err)
		}
		all = append(all, rs...)
	}
	now := monoclock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if first {
		m.startedAt = now
	}
	seen := map[key]bool{}
	for _, nr := range all {
		r := nlroute.FromNetlink(nr, m.devNameLocked)
		seen[keyOf(r)] = true
		if first {
			m.state[keyOf(r)] = r
			m.events = append(m.events, event.Event{At: now, Kind: event.Add, Route: r, Existing: true})
		}
	}
	if !first {
		for k, r := range m.state {
			if !seen[k] {
				delete(m.state, k)
				m.synthDel[k] = true
				m.events = append(m.events, event.Event{At: now, Kind: event.Delete, Route: r, Resync: true})
			}
		}
	}
	m.notifyLocked()
	return nil
}

// readLinks (re)learns every link's name and state, so that a later link
// notification can tell a device going down from one that was already down.
func (m *Monitor) readLinks() error {
	ls, err := nsutil.Links(m.h)
	if err != nil {
		return err
	}
	devs := make(map[int]linkInfo, len(ls))
	for _, l := range ls {
		a := l.Attrs()
		devs[a.Index] = linkInfo{name: a.Name, up: a.Flags&net.FlagUp != 0}
	}
	m.mu.Lock()
	m.devs = devs
	m.mu.Unlock()
	return nil
}

// onSubscriptionError is the subscriptions' error callback. An interrupted
// dump is not a lost event: it asks the loop to read everything again (the
// subscriptions make no dumps of their own today, so this is a guard for
// when one does). Anything else is recorded.
func (m *Monitor) onSubscriptionError(err error) {
	if errors.Is(err, netlink.ErrDumpInterrupted) {
		select {
		case m.redump <- struct{}{}:
		default: // one is already pending
		}
		return
	}
	m.onError(err)
}

func (m *Monitor) onError(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, fmt.Sprintf("%d: %v", monoclock.Now(), err))
}

func (m *Monitor) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *Monitor) loop(routes chan netlink.RouteUpdate, links chan netlink.LinkUpdate) {
	defer close(m.finished)
	for {
		select {
		case <-m.stop:
			close(m.subDone)
			return
		case u, ok := <-routes:
			if !ok {
				routes, links = m.restart(routes, links, "route")
				if routes == nil {
					return
				}
				continue
			}
			if m.tokenTaken(u) {
				continue
			}
			m.record(monoclock.Now(), u)
		case <-m.redump:
			if err := m.readLinks(); err != nil {
				m.onError(fmt.Errorf("re-read links after an interrupted dump: %w", err))
			} else if err := m.readTables(false); err != nil {
				m.onError(fmt.Errorf("re-read routes after an interrupted dump: %w", err))
			}
		case u, ok := <-links:
			if !ok {
				routes, links = m.restart(routes, links, "link")
				if routes == nil {
					return
				}
				continue
			}
			m.mu.Lock()
			m.lastLink.push(monoclock.Now())
			m.mu.Unlock()
			if m.linkChanged(u) {
				// IPv4 routes through a device that went down or away are
				// removed without a notification; re-read to see it.
				if err := m.readTables(false); err != nil {
					m.onError(fmt.Errorf("resync after link change: %w", err))
				}
			}
		}
	}
}

// restart re-subscribes after a subscription failed (e.g. ENOBUFS when
// notifications came faster than they were read) and resyncs; it returns nil
// channels when the monitor is closing. What the old subscription may have
// missed is recorded as a gap, from the earliest time a missed change can
// have happened (stampRing) to the new subscription's re-read.
func (m *Monitor) restart(oldRoutes chan netlink.RouteUpdate, oldLinks chan netlink.LinkUpdate, which string) (chan netlink.RouteUpdate, chan netlink.LinkUpdate) {
	close(m.subDone)
	m.mu.Lock()
	ring := &m.lastRoute
	if which == "link" {
		ring = &m.lastLink
	}
	from := m.subAt
	if t, ok := ring.oldest(); ok {
		from = max(from, t)
	}
	reason := which + " subscription ended"
	if n := len(m.errs); n > 0 {
		reason += ", last error: " + m.errs[n-1]
	}
	m.openGap = &event.Gap{Node: m.name, From: from, Reason: reason}
	m.mu.Unlock()
	// Route notifications the old subscription had already queued are
	// real: keep them (without waiting for more).
	for drained := false; !drained; {
		select {
		case u, ok := <-oldRoutes:
			if !ok {
				drained = true
				break
			}
			m.record(monoclock.Now(), u)
		default:
			drained = true
		}
	}
	_ = oldLinks // the re-read below relearns every link
	for {
		select {
		case <-m.stop:
			m.closeGap()
			return nil, nil
		default:
		}
		m.onError(errors.New("subscription ended; re-subscribing and re-reading routes"))
		routes, links, err := m.subscribe(false)
		if err == nil {
			m.closeGap()
			return routes, links
		}
		m.onError(err)
		select {
		case <-m.stop:
			return nil, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stampRing holds when the loop took each of the last n notifications of
// one socket. A notification the kernel dropped (ENOBUFS) or left queued
// when the subscription ended came after the last one delivered, mk; when
// the kernel queued mk, at most n−1 notifications stood between it and the
// loop (the socket's queue, the reader's batch, the channel), so the loop
// had already taken the one n before mk. A missed change therefore happened
// after that one was taken: the oldest stamp here, once n are held (before
// that, the subscription's start). Stamps are when the loop took a
// notification, which under a backlog is long after the kernel sent it.
type stampRing struct {
	t    []int64
	n, i int
}

func (r *stampRing) reset(n int) { r.t, r.n, r.i = r.t[:0], n, 0 }

func (r *stampRing) push(at int64) {
	if len(r.t) < r.n {
		r.t = append(r.t, at)
		return
	}
	r.t[r.i] = at
	r.i = (r.i + 1) % r.n
}

func (r *stampRing) oldest() (int64, bool) {
	if r.n == 0 || len(r.t) < r.n {
		return 0, false
	}
	return r.t[r.i], true
}

// linkRcvBufMax bounds the link subscription's socket buffer, which the
// monitor leaves at the kernel's default (net.core.rmem_default, 208 KiB
// on Debian): the largest SO_RCVBUF without force (rmem_max is 4 MiB here).
const linkRcvBufMax = 4 << 20

// pipelineMessages is how many notifications can stand between the kernel
// and the loop: the channel, the socket's queue (the kernel doubles
// SO_RCVBUF and charges each notification's skb, over 256 bytes, against
// it) and one read of the reader (64 KiB of 16-byte headers at least).
func pipelineMessages(chanCap, rcvBuf int) int {
	return chanCap + 2*rcvBuf/256 + 65536/16 + 1
}

// closeGap ends the open gap now and records it as a GapKind event.
func (m *Monitor) closeGap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.openGap == nil {
		return
	}
	g := *m.openGap
	g.To = monoclock.Now()
	m.openGap = nil
	m.events = append(m.events, event.Event{At: g.To, Kind: event.GapKind, Gap: &g})
	m.notifyLocked()
}

func (m *Monitor) linkChanged(u netlink.LinkUpdate) (wentAway bool) {
	idx := int(u.Index)
	up := u.Flags&unix.IFF_UP != 0
	m.mu.Lock()
	defer m.mu.Unlock()
	old, known := m.devs[idx]
	if u.Header.Type == unix.RTM_DELLINK {
		delete(m.devs, idx)
		return true
	}
	name := ""
	if u.Link != nil {
		name = u.Link.Attrs().Name
	}
	m.devs[idx] = linkInfo{name: name, up: up}
	return known && old.up && !up
}

// devNameLocked resolves an ifindex to a name, asking the kernel on a cache
// miss (the link notification may not have been read yet).
func (m *Monitor) devNameLocked(idx int) string {
	if idx <= 0 {
		return ""
	}
	if li, ok := m.devs[idx]; ok && li.name != "" {
		return li.name
	}
	l, err := m.h.LinkByIndex(idx)
	if err != nil {
		return fmt.Sprintf("if%d", idx)
	}
	m.devs[idx] = linkInfo{name: l.Attrs().Name, up: l.Attrs().Flags&net.FlagUp != 0}
	return l.Attrs().Name
}

func (m *Monitor) record(at int64, u netlink.RouteUpdate) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if u.Route.Flags&unix.RTM_F_CLONED != 0 {
		return // route cache entries, not routes
	}
	r := nlroute.FromNetlink(u.Route, m.devNameLocked)
	k := keyOf(r)
	m.lastRoute.push(at)
	ev := event.Event{At: at, Route: r, NlFlags: u.NlFlags}
	switch u.Type {
	case unix.RTM_NEWROUTE:
		delete(m.synthDel, k)
		ev.Kind = event.Add
		if _, ok := m.state[k]; ok {
			ev.Kind = event.Replace
		}
		m.state[k] = r
	case unix.RTM_DELROUTE:
		if _, ok := m.state[k]; !ok && m.synthDel[k] {
			delete(m.synthDel, k) // already recorded by a resync
			return
		}
		delete(m.state, k)
		ev.Kind = event.Delete
	default:
		return
	}
	m.events = append(m.events, ev)
	m.notifyLocked()
}

// Close stops recording and releases the namespace. Safe to call twice.
func (m *Monitor) Close() error {
	if m.synthetic {
		return nil
	}
	select {
	case <-m.stop:
		return nil
	default:
	}
	close(m.stop)
	<-m.finished
	m.h.Close()
	return m.nsh.Close()
}

// closed reports whether Close has been called.
func (m *Monitor) closed() bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}

// Name is the monitor's name from Options.
func (m *Monitor) Name() string { return m.name }

// StartedAt is when the monitor read the existing routes; nothing before it
// is known.
func (m *Monitor) StartedAt() int64 { return m.startedAt }

// Errors returns subscription errors seen so far (each prefixed with its
// monotonic time). A non-empty list means events may have been lost and
// recovered only by a resync.
func (m *Monitor) Errors() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.errs...)
}

// Events returns every event recorded so far, oldest first.
func (m *Monitor) Events() []event.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]event.Event(nil), m.events...)
}

// EventsFor returns the changes to prefix p in the main table in [from, to]
// (Existing entries excluded), and the GapKind event of every subscription
// gap that overlaps the span (whatever its At): a caller that counts
// deletes must also call Judgeable. to <= 0 means no upper bound.
func (m *Monitor) EventsFor(p netip.Prefix, from, to int64) []event.Event {
	p = p.Masked()
	if to <= 0 {
		to = math.MaxInt64
	}
	var out []event.Event
	for _, e := range m.Events() {
		switch {
		case e.Kind == event.GapKind && e.Gap != nil:
			if e.Gap.From <= to && e.Gap.To >= from {
				out = append(out, e)
			}
		case !e.Existing && e.Route.Table == kroute.MainTable && e.Route.Dst == p && e.At >= from && e.At <= to:
			out = append(out, e)
		}
	}
	return out
}

// WaitFor returns the first event (from the beginning) that matches, waiting
// for it until ctx is done.
func (m *Monitor) WaitFor(ctx context.Context, match func(event.Event) bool) (event.Event, error) {
	seen := 0
	for {
		m.mu.Lock()
		evs, ch := m.events[seen:], m.changed
		m.mu.Unlock()
		for _, e := range evs {
			if match(e) {
				return e, nil
			}
		}
		seen += len(evs)
		select {
		case <-ctx.Done():
			return event.Event{}, fmt.Errorf("route timeline %s: waiting for a route event: %w", m.name, ctx.Err())
		case <-ch:
		}
	}
}

// Routes returns the routes present now (as far as the monitor has seen),
// sorted by table, prefix and metric.
func (m *Monitor) Routes() []kroute.Route {
	m.mu.Lock()
	out := make([]kroute.Route, 0, len(m.state))
	for _, r := range m.state {
		out = append(out, r)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		if c := a.Dst.Addr().Compare(b.Dst.Addr()); c != 0 {
			return c < 0
		}
		if a.Dst.Bits() != b.Dst.Bits() {
			return a.Dst.Bits() < b.Dst.Bits()
		}
		return a.Metric < b.Metric
	})
	return out
}

// RoutesTo returns the main-table routes present now (as far as the monitor
// has seen) whose destination lies inside dst; the zero prefix means every
// main-table route. Sorted as Routes.
func (m *Monitor) RoutesTo(dst netip.Prefix) []kroute.Route {
	var out []kroute.Route
	for _, r := range m.Routes() {
		if r.Table != kroute.MainTable || !r.Dst.IsValid() {
			continue
		}
		if dst.IsValid() && !(dst.Bits() <= r.Dst.Bits() && dst.Contains(r.Dst.Addr())) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// RoutesByProtocol returns the main table's routes present now, grouped by
// protocol (e.g. kroute.ProtoBIRD, kroute.ProtoCalicoDefault).
func (m *Monitor) RoutesByProtocol() map[kroute.Protocol][]kroute.Route {
	out := map[kroute.Protocol][]kroute.Route{}
	for _, r := range m.Routes() {
		if r.Table == kroute.MainTable {
			out[r.Protocol] = append(out[r.Protocol], r)
		}
	}
	return out
}
