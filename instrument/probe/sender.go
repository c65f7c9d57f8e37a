package probe

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// sender is one flow's socket and what it sent. The socket is created inside
// the source workload's netns and keeps that netns for its life, so the send
// loop runs on an ordinary thread.
type sender struct {
	flow Flow
	fd   int

	seq       uint64 // last sequence number sent; only the send loop touches it
	sent      atomic.Uint64
	firstNs   atomic.Int64
	lastNs    atomic.Int64
	maxGapNs  atomic.Int64 // largest pause between two successful sends
	pauseNs   int64        // a pause longer than this is recorded in pauses
	errMu     sync.Mutex
	errCounts map[string]uint64
	pauses    []pause  // guarded by errMu; at most maxPauses, the longest kept
	bins      sendBins // guarded by errMu; when each sequence number was sent
}

// pause is an interval in which the sender sent nothing on a flow (between
// two successful sends), monotonic ns.
type pause struct{ from, to int64 }

// maxPauses bounds the pause record; beyond it the shortest are dropped.
const maxPauses = 1024

func sockaddr(a netip.Addr, port uint16) unix.Sockaddr {
	if a.Is4() {
		return &unix.SockaddrInet4{Addr: a.As4(), Port: int(port)}
	}
	return &unix.SockaddrInet6{Addr: a.As16(), Port: int(port)}
}

// dial opens a non-blocking UDP socket in the source netns, bound to the
// source address and connected to the destination. Non-blocking: a full
// socket buffer is a counted send error (EAGAIN), never a stalled send loop.
// Connected: ICMP errors for earlier probes show up as send errors
// (ECONNREFUSED, EHOSTUNREACH), which says what the network did.
func dial(f Flow, port uint16) (*sender, error) {
	n, err := ns.GetNS(f.Src.Netns)
	if err != nil {
		return nil, fmt.Errorf("flow %s: open source netns: %w", f.Name(), err)
	}
	defer n.Close()
	fam := unix.AF_INET
	if f.Src.Addr.Is6() {
		fam = unix.AF_INET6
	}
	fd := -1
	err = n.Do(func(ns.NetNS) error {
		var err error
		fd, err = unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket: %w", err)
		}
		if err := unix.Bind(fd, sockaddr(f.Src.Addr, 0)); err != nil {
			return fmt.Errorf("bind %s: %w", f.Src.Addr, err)
		}
		if err := unix.Connect(fd, sockaddr(f.Dst.Addr, port)); err != nil {
			return fmt.Errorf("connect %s:%d: %w", f.Dst.Addr, port, err)
		}
		return nil
	})
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("flow %s: sender socket in %s: %w", f.Name(), f.Src.Netns, err)
	}
	return &sender{flow: f, fd: fd, errCounts: map[string]uint64{}}, nil
}

func (sd *sender) close() error {
	if sd.fd < 0 {
		return nil
	}
	err := unix.Close(sd.fd)
	sd.fd = -1
	if err != nil {
		return fmt.Errorf("flow %s: close sender socket: %w", sd.flow.Name(), err)
	}
	return nil
}

func (sd *sender) send(buf []byte) {
	now := monoclock.Now()
	bpf.PutProbe(buf, sd.seq+1, now)
	if _, err := unix.Write(sd.fd, buf); err != nil {
		name := err.Error()
		var errno unix.Errno
		if errors.As(err, &errno) {
			if n := unix.ErrnoName(errno); n != "" {
				name = n
			}
		}
		sd.errMu.Lock()
		sd.errCounts[name]++
		sd.errMu.Unlock()
		return
	}
	// A failed send does not use up a sequence number: a gap in the
	// sequence at the receiver is always a probe lost after leaving.
	sd.seq++
	sd.sent.Add(1)
	sd.errMu.Lock()
	sd.bins.record(sd.seq, now)
	sd.errMu.Unlock()
	if last := sd.lastNs.Load(); last == 0 {
		sd.firstNs.Store(now)
	} else {
		g := now - last
		if g > sd.maxGapNs.Load() {
			sd.maxGapNs.Store(g)
		}
		if g > sd.pauseNs {
			sd.recordPause(pause{from: last, to: now})
		}
	}
	sd.lastNs.Store(now)
}

func (sd *sender) recordPause(p pause) {
	sd.errMu.Lock()
	defer sd.errMu.Unlock()
	if len(sd.pauses) < maxPauses {
		sd.pauses = append(sd.pauses, p)
		return
	}
	shortest := 0
	for i, q := range sd.pauses {
		if q.to-q.from < sd.pauses[shortest].to-sd.pauses[shortest].from {
			shortest = i
		}
	}
	if p.to-p.from > sd.pauses[shortest].to-sd.pauses[shortest].from {
		sd.pauses[shortest] = p
	}
}

// pauseWithin is the longest time the sender sent nothing on this flow
// inside [from, to]: the part of a receiver-side gap the sender itself
// accounts for.
func (sd *sender) pauseWithin(from, to int64) int64 {
	sd.errMu.Lock()
	defer sd.errMu.Unlock()
	var longest int64
	for _, p := range sd.pauses {
		a, b := max(p.from, from), min(p.to, to)
		longest = max(longest, b-a)
	}
	return longest
}

func (sd *sender) errors() map[string]uint64 {
	sd.errMu.Lock()
	defer sd.errMu.Unlock()
	if len(sd.errCounts) == 0 {
		return nil
	}
	out := make(map[string]uint64, len(sd.errCounts))
	for k, v := range sd.errCounts {
		out[k] = v
	}
	return out
}

// maxBacklog is how far behind schedule the send loop catches up by sending
// back to back; beyond it, it resumes the cadence from now.
const maxBacklog = int64(100 * time.Millisecond)

// sendLoop sends one probe per flow every interval until stopping. It sleeps
// with clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) on its own locked
// thread: microsecond wake-ups without going through the Go timer heap, and
// no drift. The thread never changes namespace. After a stall (CPU
// contention) it catches up by sending the probes that were due back to back
// (up to maxBacklog), so the number sent over any window matches the rate and
// a lost count converts to an outage length. A stall still shows as a gap at
// the receiver; SenderLongestGapMs in the report tells the two apart.
//
// Unless Options.NoRealtime, the thread asks for SCHED_FIFO priority 1 (best
// effort; granted to root): on a busy CI runner a normal thread is stalled
// for milliseconds at a time, which would blur every gap. It sleeps between
// probes, and the kernel's RT throttling bounds it anyway. The thread is
// never unlocked, so it exits with the goroutine instead of returning to Go's
// pool with a real-time policy.
func (s *Session) sendLoop() {
	defer close(s.sendDone)
	runtime.LockOSThread()
	if !s.opts.NoRealtime {
		err := unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0)
		s.realtime.Store(err == nil)
	}
	buf := make([]byte, bpf.ProbeLen)
	next := monoclock.Now()
	for !s.stopping.Load() {
		if now := monoclock.Now(); now < next {
			sleepUntil(next)
		} else if now-next > maxBacklog {
			next = now
		}
		for _, sd := range s.senders {
			sd.send(buf)
		}
		next += s.interval
	}
}

func sleepUntil(ns int64) {
	ts := unix.NsecToTimespec(ns)
	for {
		err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
		if err != unix.EINTR {
			return
		}
	}
}
