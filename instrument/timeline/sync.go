package timeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// A Monitor stamps an event when it reads the notification, so a spec that
// reads the kernel's routes and then takes an instant can take it before the
// monitor has read a change the kernel made earlier: replayed from that
// instant, the timeline shows a window the kernel never had. Sync closes that
// race at its root. The kernel queues route notifications on the monitor's
// subscription socket in the order it made the changes; Sync puts a token in
// the same queue (a netlink message from a socket of its own, unicast to the
// subscription's port, which the netlink library hands to the subscription's
// error callback as a message from a sender that is not the kernel) and
// returns once the monitor's loop has taken the token, so every change made
// before the call has been recorded, stamped before Sync returned. The token
// reaches only this process's own socket: no route, link or daemon in the
// namespace sees it.

// routeGroups is the multicast membership of a Monitor's route subscription
// (as getsockname reports the first 32 groups): what Sync looks for.
const routeGroups = 1<<(unix.RTNLGRP_IPV4_ROUTE-1) | 1<<(unix.RTNLGRP_IPV6_ROUTE-1)

// barrierType marks a token on a subscription's update channel; the kernel
// sends no NLMSG_NOOP on the route groups, and the library passes none on.
const barrierType = unix.NLMSG_NOOP

// pendingBarrier is a token: the monitor it was sent for, and done, closed
// once that monitor's loop took it.
type pendingBarrier struct {
	m      *Monitor
	done   chan struct{}
	issued time.Time
}

// tokenKey names a token: its socket's namespace and port id. A port id is
// unique only within a namespace (a process's first socket in each one may
// get the same id, its pid).
type tokenKey struct {
	ns   nsID
	port uint32
}

// barriers maps a tokenKey to its pendingBarrier. Process-wide: a token goes
// to every route subscription of the process in the namespace, and the other
// monitors there must recognise it as not theirs, also after the Sync that
// sent it has returned (another subscription may read it later), so entries
// stay for tokenMemory.
var barriers sync.Map

// tokenMemory is how long a token is recognised after it was sent: far
// beyond any subscription's reading delay, short enough that the registry
// stays small and a reused port id is not mistaken for an old token.
const tokenMemory = time.Minute

// forgetOldTokens drops the tokens sent more than tokenMemory ago.
func forgetOldTokens(now time.Time) {
	barriers.Range(func(k, v any) bool {
		if now.Sub(v.(*pendingBarrier).issued) > tokenMemory {
			barriers.Delete(k)
		}
		return true
	})
}

// Sync returns once every monitor in ms has recorded every route change the
// kernel made in its namespace before Sync was called, or ctx ends. An
// instant taken after it returns is later than the stamp of every such
// change. Closed and synthetic monitors are skipped.
func Sync(ctx context.Context, ms ...*Monitor) error {
	var live []*Monitor
	for _, m := range ms {
		if m != nil && !m.synthetic && !m.closed() {
			live = append(live, m)
		}
	}
	if len(live) == 0 {
		return nil
	}
	forgetOldTokens(time.Now())
	subs, err := routeSubscriptions()
	if err != nil {
		return fmt.Errorf("route timeline sync: %w", err)
	}
	ports := map[nsID][]uint32{}
	for _, sub := range subs {
		ports[sub.ns] = append(ports[sub.ns], sub.port)
	}
	type sent struct {
		m *Monitor
		s *nl.NetlinkSocket
		b *pendingBarrier
	}
	var all []sent
	defer func() {
		for _, x := range all {
			x.s.Close()
		}
	}()
	for _, m := range live {
		to := ports[m.nsID]
		if len(to) == 0 {
			return fmt.Errorf("route timeline %s: sync: no route subscription of this process in its namespace", m.name)
		}
		s, port, err := tokenSocket(m.nsh)
		if err != nil {
			return fmt.Errorf("route timeline %s: sync: %w", m.name, err)
		}
		b := &pendingBarrier{m: m, done: make(chan struct{}), issued: time.Now()}
		barriers.Store(tokenKey{m.nsID, port}, b)
		all = append(all, sent{m: m, s: s, b: b})
		if err := sendToken(s, to); err != nil {
			return fmt.Errorf("route timeline %s: sync: %w", m.name, err)
		}
	}
	for _, x := range all {
		select {
		case <-x.b.done:
		case <-x.m.finished:
		case <-ctx.Done():
			return fmt.Errorf("route timeline %s: sync: the monitor did not take its token: %w", x.m.name, ctx.Err())
		}
	}
	return nil
}

// SyncWithin is Sync bounded by d.
func SyncWithin(d time.Duration, ms ...*Monitor) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return Sync(ctx, ms...)
}

// tokenSocket opens a NETLINK_ROUTE socket in the namespace and returns it
// with the port id the kernel bound it to: the token's sender, and so its
// name to the receiving callback.
func tokenSocket(nsh netns.NsHandle) (*nl.NetlinkSocket, uint32, error) {
	s, err := nl.GetNetlinkSocketAt(nsh, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, 0, fmt.Errorf("token socket: %w", err)
	}
	port, err := s.GetPid()
	if err != nil {
		s.Close()
		return nil, 0, fmt.Errorf("token socket's port: %w", err)
	}
	return s, port, nil
}

// sendToken unicasts an empty NLMSG_NOOP to each port. More than one port in
// a namespace means more than one subscription of this process there
// (another monitor of it, or one being replaced); each monitor takes only
// its own tokens. It never waits for room: the kernel may hold a unicast to
// a congested socket until it drains (netlink_attachskb), and Sync must end
// with its context, not with the monitor.
func sendToken(s *nl.NetlinkSocket, ports []uint32) error {
	msg := make([]byte, unix.NLMSG_HDRLEN)
	nl.NativeEndian().PutUint32(msg[0:4], unix.NLMSG_HDRLEN)
	nl.NativeEndian().PutUint16(msg[4:6], unix.NLMSG_NOOP)
	var errs []error
	for _, p := range ports {
		if err := unix.Sendto(s.GetFd(), msg, unix.MSG_DONTWAIT, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Pid: p}); err != nil {
			errs = append(errs, fmt.Errorf("token to port %d: %w", p, err))
		}
	}
	if len(errs) == len(ports) {
		return errors.Join(errs...)
	}
	return nil // one reached a subscription; a closing one may refuse
}

// takeToken is the route subscription's error callback's first look: a
// message from a sender that is not the kernel is a Sync token when its
// port is a pending barrier. Ours goes on the update channel behind every
// notification read before it; another monitor's is ignored. It reports
// whether err was a token.
func (m *Monitor) takeToken(routes chan<- netlink.RouteUpdate, err error) bool {
	var port, kernel uint32
	if _, e := fmt.Sscanf(err.Error(), "Wrong sender portid %d, expected %d", &port, &kernel); e != nil {
		return false
	}
	v, ok := barriers.Load(tokenKey{m.nsID, port})
	if !ok {
		return false
	}
	if v.(*pendingBarrier).m == m {
		// Blocks only as a notification would: the library's reader is
		// the channel's one sender, so the order holds.
		routes <- netlink.RouteUpdate{Type: barrierType, Route: netlink.Route{Table: int(port)}}
	}
	return true
}

// tokenTaken is the loop's side: every update before u has been recorded.
func (m *Monitor) tokenTaken(u netlink.RouteUpdate) bool {
	if u.Type != barrierType {
		return false
	}
	if v, ok := barriers.Load(tokenKey{m.nsID, uint32(u.Route.Table)}); ok {
		b := v.(*pendingBarrier)
		select {
		case <-b.done:
		default:
			close(b.done)
		}
	}
	return true
}

// nsID names a network namespace by its nsfs device and inode.
type nsID struct{ dev, ino uint64 }

func nsIDOf(fd int) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nsID{}, err
	}
	return nsID{st.Dev, st.Ino}, nil
}

// subscription is one of this process's netlink sockets joined to exactly a
// Monitor's route groups: its namespace, its port id (where tokens go) and
// the descriptor it was found at.
type subscription struct {
	ns   nsID
	port uint32
	fd   int
}

// routeSubscriptions finds this process's route subscription sockets. The
// library keeps its subscription socket to itself, so it is found among the
// process's file descriptors.
func routeSubscriptions() ([]subscription, error) {
	const fdDir = "/proc/self/fd"
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return nil, err
	}
	var out []subscription
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// A descriptor may close and be reused while this runs: each
		// check below is a read, and the last one confirms a socket.
		if l, err := os.Readlink(filepath.Join(fdDir, e.Name())); err != nil || !strings.HasPrefix(l, "socket:[") {
			continue
		}
		if d, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil || d != unix.AF_NETLINK {
			continue
		}
		if p, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || p != unix.NETLINK_ROUTE {
			continue
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		nla, ok := sa.(*unix.SockaddrNetlink)
		if !ok || nla.Groups != routeGroups {
			continue
		}
		nsfd, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS)
		if err != nil {
			continue
		}
		id, err := nsIDOf(nsfd)
		unix.Close(nsfd)
		if err != nil {
			continue
		}
		out = append(out, subscription{ns: id, port: nla.Pid, fd: fd})
	}
	return out, nil
}
