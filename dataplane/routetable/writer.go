package routetable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"
	"unsafe"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// writer sends route requests (RTM_NEWROUTE, RTM_DELROUTE) on one
// NETLINK_ROUTE socket of its own, many at a time: requests go out in
// batches of up to window messages in one sendto, each with NLM_F_ACK and
// its own sequence number, and every acknowledgement is matched back to its
// request by that number. One request and one acknowledgement at a time (the
// netlink library's way) costs two system calls, a 64 KiB receive buffer and
// several allocations per route; the kernel's own cost per route is a few
// microseconds, so at 10k routes the round trips dominated.
//
// The kernel processes a batch's messages in order, each on its own: an
// error in one does not stop the ones after it. Acknowledgements queue in
// the socket's receive buffer, which is sized so that a full window of them
// fits (an overrun would drop them: ENOBUFS), and the window is derived from
// the size the kernel granted. Buffers are reused across batches and passes.
//
// Dumps stay with the netlink library (nsutil.Dump's retry on interrupted
// dumps); this is only the write path.
type writer struct {
	fd     int // blocking, CLOEXEC; -1 once closed
	portID uint32
	seq    uint32
	window int

	sbuf []byte
	// The receive side: ackSlots datagrams per recvmmsg, each into its own
	// ackSlotSize part of rbuf.
	rbuf []byte
	iov  []unix.Iovec
	mm   []mmsghdr
	// Per batch: the request index of each message sent (position k has
	// sequence number base+k) and whether it has been acknowledged.
	idx   []int
	acked []bool
	errs  []error
}

const (
	// writerWindow is the most requests in flight at once. Beyond ~100 the
	// gain per request is gone (the kernel's work dominates).
	writerWindow = 256
	// ackTruesize is a generous bound on what one queued acknowledgement
	// costs the receive buffer (skb overhead included); the window is
	// capped at rcvbuf/(2*ackTruesize).
	ackTruesize = 1280
	// writerRcvBuf is the receive buffer asked for (SO_RCVBUFFORCE, else
	// SO_RCVBUF capped by net.core.rmem_max).
	writerRcvBuf = 4 << 20
	// maxBatchBytes bounds one sendto (the kernel refuses a netlink
	// message skb larger than the send buffer).
	maxBatchBytes = 64 << 10
	// ackSlots is how many acknowledgements one recvmmsg can return;
	// ackSlotSize holds one with its extended-ack string (an old kernel's
	// echo of the request may be cut off: the errno and the sequence
	// number, at the start, are all that matter).
	ackSlots    = 64
	ackSlotSize = 512
	// ackTimeout bounds the wait for a batch's acknowledgements; the kernel
	// answers within sendto, so reaching it means acknowledgements were
	// lost.
	ackTimeout = 10 * time.Second
)

// Netlink extended-ack constants (linux/netlink.h), not all in x/sys/unix.
const (
	nlmFCapped      = 0x100 // NLM_F_CAPPED: the request was not echoed
	nlmFAckTLVs     = 0x200 // NLM_F_ACK_TLVS: extended-ack attributes follow
	nlmsgerrAttrMsg = 1     // NLMSGERR_ATTR_MSG: the kernel's error string
)

// openWriter opens the writer's socket in ns (netns.None(): the calling
// thread's namespace).
func openWriter(ns netns.NsHandle) (*writer, error) {
	fd, err := socketIn(ns)
	if err != nil {
		return nil, fmt.Errorf("route table: netlink socket: %w", err)
	}
	w := &writer{fd: fd}
	ok := false
	defer func() {
		if !ok {
			_ = unix.Close(fd)
		}
	}()
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("route table: netlink bind: %w", err)
	}
	sa, err := unix.Getsockname(w.fd)
	if err != nil {
		return nil, fmt.Errorf("route table: netlink socket name: %w", err)
	}
	nsa, isNL := sa.(*unix.SockaddrNetlink)
	if !isNL {
		return nil, fmt.Errorf("route table: netlink socket name: unexpected %T", sa)
	}
	w.portID = nsa.Pid
	// Acknowledgements without the request echoed (small, fixed size), with
	// the kernel's reason string when it has one. Both are optional: an old
	// kernel echoes the request and gives no string, which still works.
	_ = unix.SetsockoptInt(w.fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	_ = unix.SetsockoptInt(w.fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	if err := unix.SetsockoptInt(w.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, writerRcvBuf); err != nil {
		_ = unix.SetsockoptInt(w.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, writerRcvBuf)
	}
	rcv, err := unix.GetsockoptInt(w.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	if err != nil {
		return nil, fmt.Errorf("route table: netlink receive buffer: %w", err)
	}
	w.window = max(1, min(writerWindow, rcv/(2*ackTruesize)))
	tv := unix.NsecToTimeval(ackTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(w.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, fmt.Errorf("route table: netlink receive timeout: %w", err)
	}
	w.seq = uint32(time.Now().UnixNano())
	w.sbuf = make([]byte, 0, maxBatchBytes+4096)
	w.rbuf = make([]byte, ackSlots*ackSlotSize)
	w.iov = make([]unix.Iovec, ackSlots)
	w.mm = make([]mmsghdr, ackSlots)
	for k := range w.mm {
		w.iov[k].Base = &w.rbuf[k*ackSlotSize]
		w.iov[k].SetLen(ackSlotSize)
		w.mm[k].hdr.Iov = &w.iov[k]
		w.mm[k].hdr.SetIovlen(1)
	}
	ok = true
	return w, nil
}

// socketIn opens a blocking NETLINK_ROUTE socket in ns: a socket belongs to
// the namespace it was created in, whatever thread uses it later. (The
// netlink library's sockets are non-blocking and tied to Go's poller; this
// one is read with plain blocking system calls and a receive timeout.)
func socketIn(ns netns.NsHandle) (int, error) {
	if !ns.IsOpen() {
		return unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	}
	// On a goroutine of its own, locked to its thread and never unlocked:
	// the thread, switched to ns, is discarded when the goroutine ends, so
	// no other code ever runs in the wrong namespace.
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			ch <- result{-1, fmt.Errorf("enter netns: %w", err)}
			return
		}
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}

func (w *writer) close() {
	if w != nil && w.fd >= 0 {
		_ = unix.Close(w.fd)
		w.fd = -1
	}
}

// encodeFunc appends request i's body (rtmsg and attributes) to b and says
// which message it is. An error means request i is not sent; the error is
// its result.
type encodeFunc func(i int, b []byte) (body []byte, typ, flags uint16, err error)

// exchange sends n requests and returns each one's result: nil when the
// kernel acknowledged it, the kernel's errno (wrapped in a *KernelError)
// when it refused it, the encoder's error when it was never sent, or
// ErrNoAck when its fate is unknown (the batch's acknowledgements were lost;
// the caller must not assume it happened). The slice is reused by the next
// call.
func (w *writer) exchange(n int, enc encodeFunc) []error {
	w.errs = w.errs[:0]
	for range n {
		w.errs = append(w.errs, nil)
	}
	for i := 0; i < n; {
		buf := w.sbuf[:0]
		w.idx = w.idx[:0]
		base := w.seq
		for i < n && len(w.idx) < w.window && len(buf) < maxBatchBytes {
			start := len(buf)
			buf = append(buf, make([]byte, unix.SizeofNlMsghdr)...)
			body, typ, flags, err := enc(i, buf)
			if err != nil {
				w.errs[i] = err
				buf = buf[:start]
				i++
				continue
			}
			buf = body
			seq := base + uint32(len(w.idx))
			h := buf[start:]
			ne := binary.NativeEndian
			ne.PutUint32(h[0:], uint32(len(buf)-start))
			ne.PutUint16(h[4:], typ)
			ne.PutUint16(h[6:], flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
			ne.PutUint32(h[8:], seq)
			ne.PutUint32(h[12:], 0)
			// Messages are 4-byte aligned; every encoder writes whole
			// attributes, so this is a no-op kept as a guard.
			for len(buf)%unix.NLMSG_ALIGNTO != 0 {
				buf = append(buf, 0)
			}
			w.idx = append(w.idx, i)
			i++
		}
		w.sbuf = buf[:0]
		if len(w.idx) == 0 {
			continue
		}
		w.seq = base + uint32(len(w.idx))
		w.batch(buf, base)
	}
	return w.errs
}

// batch sends one batch and collects its acknowledgements.
func (w *writer) batch(buf []byte, base uint32) {
	fail := func(err error) {
		for k, i := range w.idx {
			if !w.acked[k] {
				w.errs[i] = err
			}
		}
	}
	w.acked = w.acked[:0]
	for range w.idx {
		w.acked = append(w.acked, false)
	}
	if err := unix.Sendto(w.fd, buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		fail(fmt.Errorf("route table: netlink send: %w", err))
		return
	}
	pending := len(w.idx)
	for pending > 0 {
		got, err := w.recvAcks()
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// EAGAIN: the timeout passed; ENOBUFS: the receive buffer
			// overran and acknowledgements were dropped.
			fail(fmt.Errorf("%w: %v", ErrNoAck, os.NewSyscallError("recvmmsg", err)))
			return
		}
		for j := range got {
			nr := int(w.mm[j].n)
			msgs := w.rbuf[j*ackSlotSize : j*ackSlotSize+min(nr, ackSlotSize)]
			pending -= w.book(msgs, base)
		}
	}
}

// mmsghdr is struct mmsghdr (Go pads it to the C layout's alignment).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// recvAcks waits for at least one datagram (SO_RCVTIMEO bounds the wait)
// and takes whatever else is queued, up to ackSlots, in one system call.
func (w *writer) recvAcks() (int, error) {
	for k := range w.mm {
		w.mm[k].hdr.Flags = 0
		w.mm[k].n = 0
	}
	n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(w.fd), uintptr(unsafe.Pointer(&w.mm[0])), uintptr(len(w.mm)),
		unix.MSG_WAITFORONE, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// book matches the acknowledgements in one datagram to the batch's
// requests and returns how many it answered.
func (w *writer) book(msgs []byte, base uint32) int {
	answered := 0
	ne := binary.NativeEndian
	for len(msgs) >= unix.SizeofNlMsghdr {
		l := int(ne.Uint32(msgs[0:]))
		if l < unix.SizeofNlMsghdr {
			break
		}
		m := msgs[:min(l, len(msgs))] // a cut-off datagram keeps its head
		msgs = msgs[min(len(msgs), nlmAlign(l)):]
		typ, flags, seq, pid := ne.Uint16(m[4:]), ne.Uint16(m[6:]), ne.Uint32(m[8:]), ne.Uint32(m[12:])
		k := int(seq - base)
		if typ != unix.NLMSG_ERROR || pid != w.portID || k < 0 || k >= len(w.idx) || w.acked[k] {
			continue // not an answer to this batch
		}
		w.acked[k] = true
		answered++
		if len(m) < unix.SizeofNlMsghdr+4 {
			w.errs[w.idx[k]] = fmt.Errorf("route table: short netlink acknowledgement")
			continue
		}
		if errno := int32(ne.Uint32(m[16:])); errno != 0 {
			w.errs[w.idx[k]] = &KernelError{Errno: unix.Errno(-errno), Msg: extAckMsg(m, flags)}
		}
	}
	return answered
}

// ErrNoAck marks a request whose acknowledgement never came: it may or may
// not have been applied.
var ErrNoAck = errors.New("no netlink acknowledgement")

// KernelError is the kernel's refusal of one request: its errno and, when
// the kernel gave one, its extended-ack message. errors.Is(err, unix.ESRCH)
// and the like work on it.
type KernelError struct {
	Errno unix.Errno
	Msg   string
}

func (e *KernelError) Error() string {
	if e.Msg != "" {
		return e.Errno.Error() + " (" + e.Msg + ")"
	}
	return e.Errno.Error()
}

func (e *KernelError) Unwrap() error { return e.Errno }

func nlmAlign(l int) int { return (l + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }
func rtaAlign(l int) int { return (l + unix.RTA_ALIGNTO - 1) &^ (unix.RTA_ALIGNTO - 1) }

// extAckMsg returns the NLMSGERR_ATTR_MSG string of an error message m.
func extAckMsg(m []byte, flags uint16) string {
	if flags&nlmFAckTLVs == 0 {
		return ""
	}
	ne := binary.NativeEndian
	off := unix.SizeofNlMsghdr + 4 // nlmsgerr.error
	if len(m) < off+unix.SizeofNlMsghdr {
		return ""
	}
	inner := int(ne.Uint32(m[off:]))
	off += unix.SizeofNlMsghdr
	if flags&nlmFCapped == 0 {
		off += nlmAlign(inner) - unix.SizeofNlMsghdr // the echoed request
	}
	for off+4 <= len(m) {
		l, t := int(ne.Uint16(m[off:])), ne.Uint16(m[off+2:])
		if l < 4 || off+l > len(m) {
			break
		}
		if t&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER) == nlmsgerrAttrMsg {
			v := m[off+4 : off+l]
			for len(v) > 0 && v[len(v)-1] == 0 {
				v = v[:len(v)-1]
			}
			return string(v)
		}
		off += rtaAlign(l)
	}
	return ""
}

// Encoding helpers: append fixed structures and attributes in native byte
// order without allocating.

func appendRtMsg(b []byte, family, dstLen, tos, table, protocol, scope, typ uint8, flags uint32) []byte {
	b = append(b, family, dstLen, 0, tos, table, protocol, scope, typ)
	return binary.NativeEndian.AppendUint32(b, flags)
}

func appendAttr(b []byte, typ uint16, data []byte) []byte {
	l := unix.SizeofRtAttr + len(data)
	b = binary.NativeEndian.AppendUint16(b, uint16(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for range rtaAlign(l) - l {
		b = append(b, 0)
	}
	return b
}

func appendAttrU32(b []byte, typ uint16, v uint32) []byte {
	b = binary.NativeEndian.AppendUint16(b, unix.SizeofRtAttr+4)
	b = binary.NativeEndian.AppendUint16(b, typ)
	return binary.NativeEndian.AppendUint32(b, v)
}
