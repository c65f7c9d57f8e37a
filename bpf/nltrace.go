package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// RouteRequest is one RTM_NEWROUTE or RTM_DELROUTE request the kernel
// handled in a traced namespace: who sent it, what it asked, and the errno
// the kernel acked it with.
type RouteRequest struct {
	At    int64  // CLOCK_MONOTONIC ns when it was sent (internal/monoclock)
	PID   int    // host pid (tgid) of the sender
	TID   int    // host tid of the sender
	Comm  string // the sender's command name
	NetNS uint64 // inode number of the sender's network namespace

	Type  uint16 // unix.RTM_NEWROUTE or unix.RTM_DELROUTE
	Flags uint16 // netlink header flags (unix.NLM_F_CREATE, _EXCL, _REPLACE, ...)
	// Errno is the kernel's answer: 0 accepted, else what the ack carried
	// (ESRCH: a delete that matched no route; EEXIST: an add refused).
	Errno syscall.Errno

	Family    uint8        // unix.AF_INET or unix.AF_INET6
	Dst       netip.Prefix // zero-length prefix of the family when RTA_DST is absent
	Protocol  uint8        // rtm_protocol (0: a delete that matches any protocol)
	Table     uint32       // RTA_TABLE, else rtm_table
	Metric    uint32       // RTA_PRIORITY (0 when absent)
	HasMetric bool
	RouteType uint8 // rtm_type (unix.RTN_UNICAST, ...)
	Gateway   netip.Addr
	OIF       int
	// Truncated: the send this request came in was longer than the trace
	// copies (8 × 512 bytes), so this request's attributes after the cut,
	// or the requests that followed it in the same send, are missing.
	Truncated bool

	Seq uint32 // the request's netlink sequence number
	// Answered: the sender received the kernel's ack (AckAt), whose error
	// is Errno. A request sent without NLM_F_ACK that succeeded has none.
	Answered bool
	AckAt    int64
}

// Op is "add" for RTM_NEWROUTE and "del" for RTM_DELROUTE.
func (r RouteRequest) Op() string {
	if r.Type == unix.RTM_DELROUTE {
		return "del"
	}
	return "add"
}

func (r RouteRequest) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s proto %d table %d", r.Op(), r.Dst, r.Protocol, r.Table)
	if r.HasMetric {
		fmt.Fprintf(&b, " metric %d", r.Metric)
	}
	if r.Gateway.IsValid() {
		fmt.Fprintf(&b, " via %s", r.Gateway)
	}
	if r.OIF != 0 {
		fmt.Fprintf(&b, " oif %d", r.OIF)
	}
	fmt.Fprintf(&b, " flags %#x by %s[%d]: ", r.Flags, r.Comm, r.PID)
	if !r.Answered {
		b.WriteString("no ack seen")
	} else if r.Errno == 0 {
		b.WriteString("ok")
	} else {
		fmt.Fprintf(&b, "%v (%s)", r.Errno, unix.ErrnoName(r.Errno))
	}
	return b.String()
}

// RouteTraceError says the kernel cannot run the route trace (no raw
// tracepoints, no ring buffers, no BTF to relocate against, or an
// architecture whose syscall layout the program does not know); it is a
// testenv.FeatureError.
type RouteTraceError struct{ Err error }

func (e *RouteTraceError) Error() string        { return "netlink route trace: " + e.Err.Error() }
func (e *RouteTraceError) Unwrap() error        { return e.Err }
func (*RouteTraceError) MissingFeature() string { return FeatureRouteTrace }

// FeatureRouteTrace names the capability in skips and BIRDCAGE_REQUIRE.
const FeatureRouteTrace = "bpf-rawtp-netlink"

// routeTraceUnsupported reports whether err means "this kernel cannot",
// as opposed to a bug in the program (a verifier error is never this).
func routeTraceUnsupported(err error) bool {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return false
	}
	return errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, btf.ErrNotSupported) ||
		errors.Is(err, btf.ErrNotFound) || errors.Is(err, unix.EOPNOTSUPP) ||
		errors.Is(err, syscall.Errno(524)) || // ENOTSUPP
		errors.Is(err, unix.EPERM) || errors.Is(err, os.ErrNotExist)
}

// nltraceRing is the ring buffer's size (4 MiB: some 7000 requests and acks
// between two reads); Dropped counts what did not fit.
const nltraceRing = 4 << 20

// Syscall numbers the program watches (x86-64).
var nltraceSyscalls = map[string]uint32{"nr_sendto": 44, "nr_recvfrom": 45, "nr_sendmsg": 46, "nr_recvmsg": 47, "nr_recvmmsg": 299}

// RouteTracer records the route requests the processes of one network
// namespace send over netlink and the kernel's acks to them, from raw
// tracepoint programs on sys_enter/sys_exit. Close detaches it.
//
// What it sees is what a process asked and what the kernel answered, not
// the kernel's route table: a request the kernel refused is there with its
// errno, and no route notification would show it.
type RouteTracer struct {
	netns uint64
	coll  *ebpf.Collection
	links []link.Link
	rd    *ringbuf.Reader

	mu     sync.Mutex
	raw    []rawNetlink
	closed bool
}

// rawNetlink is one ring buffer record: netlink bytes a traced process sent
// or received.
type rawNetlink struct {
	at       int64
	id       uint64 // the chunks of one send share it
	offset   uint32
	pid, tid int
	comm     string
	netns    uint64
	recv     bool
	len      uint32
	data     []byte
}

// NetNSInode is the inode number of the network namespace at path (e.g.
// /var/run/netns/NAME or /proc/PID/ns/net), which the kernel's
// net->ns.inum holds.
func NetNSInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat netns %s: %w", path, err)
	}
	return st.Ino, nil
}

// TraceRoutes starts tracing the route requests handled in the network
// namespace at netnsPath. An error the kernel's capabilities explain is a
// *RouteTraceError.
func TraceRoutes(netnsPath string) (*RouteTracer, error) {
	ino, err := NetNSInode(netnsPath)
	if err != nil {
		return nil, err
	}
	if ino > 0xffffffff {
		return nil, fmt.Errorf("netns %s: inode %d does not fit the kernel's inum", netnsPath, ino)
	}
	if runtime.GOARCH != "amd64" {
		return nil, &RouteTraceError{Err: fmt.Errorf("syscall layout of %s unknown to the program (x86-64 only)", runtime.GOARCH)}
	}
	if err := memlockOnce(); err != nil {
		return nil, fmt.Errorf("raise memlock rlimit for BPF: %w", err)
	}
	t, err := startRouteTrace(uint32(ino))
	if err != nil {
		if routeTraceUnsupported(err) {
			return nil, &RouteTraceError{Err: err}
		}
		return nil, err
	}
	t.netns = ino
	return t, nil
}

func startRouteTrace(ino uint32) (*RouteTracer, error) {
	spec, err := loadNltrace()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["target_netns"].Set(ino); err != nil {
		return nil, fmt.Errorf("set target_netns: %w", err)
	}
	for name, nr := range nltraceSyscalls {
		if err := spec.Variables[name].Set(nr); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	spec.Maps["events"].MaxEntries = nltraceRing
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load netlink route trace: %+v", ve)
		}
		return nil, fmt.Errorf("load netlink route trace: %w", err)
	}
	t := &RouteTracer{coll: coll}
	for _, a := range []struct{ tp, prog string }{{"sys_enter", "nltrace_enter"}, {"sys_exit", "nltrace_exit"}} {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: a.tp, Program: coll.Programs[a.prog]})
		if err != nil {
			t.closeLinks()
			coll.Close()
			return nil, fmt.Errorf("attach raw tracepoint %s: %w", a.tp, err)
		}
		t.links = append(t.links, l)
	}
	if t.rd, err = ringbuf.NewReader(coll.Maps["events"]); err != nil {
		t.closeLinks()
		coll.Close()
		return nil, fmt.Errorf("ring buffer reader: %w", err)
	}
	return t, nil
}

func (t *RouteTracer) closeLinks() error {
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	return errors.Join(errs...)
}

// NetNS is the inode number of the traced namespace.
func (t *RouteTracer) NetNS() uint64 { return t.netns }

// Events returns every route request recorded since the trace started,
// oldest first, each with the kernel's ack when one was seen. It first reads
// all the kernel has submitted: a request whose sender has received its
// ack is in the answer.
func (t *RouteTracer) Events() ([]RouteRequest, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		if err := t.drainLocked(); err != nil {
			return nil, err
		}
	}
	return pairRequests(t.raw), nil
}

// drainLocked reads the ring buffer until it is empty (a deadline in the
// past makes the reader return what is there, then ErrDeadlineExceeded).
func (t *RouteTracer) drainLocked() error {
	t.rd.SetDeadline(time.Now())
	var rec ringbuf.Record
	for {
		err := t.rd.ReadInto(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read netlink route trace: %w", err)
		}
		r, err := parseRawNetlink(rec.RawSample)
		if err != nil {
			return err
		}
		// A later chunk of a long send joins the record before it.
		if k := len(t.raw) - 1; r.offset > 0 && k >= 0 && !r.recv {
			if p := &t.raw[k]; !p.recv && p.id == r.id && p.tid == r.tid && int(r.offset) == len(p.data) {
				p.data = append(p.data, r.data...)
				continue
			}
		}
		if r.offset > 0 {
			continue // its first chunk was lost: nothing parses from the middle
		}
		t.raw = append(t.raw, r)
	}
}

// Dropped is how many records the ring buffer had no room for (a trace
// that dropped any is incomplete).
func (t *RouteTracer) Dropped() (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, errors.New("netlink route trace closed")
	}
	var n uint64
	if err := t.coll.Maps["dropped"].Lookup(uint32(0), &n); err != nil {
		return 0, err
	}
	return n, nil
}

// Close detaches the programs, keeps what was recorded until then (Events
// still answers) and frees the maps. Safe to call twice.
func (t *RouteTracer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	errs := []error{t.closeLinks(), t.drainLocked(), t.rd.Close()}
	t.coll.Close()
	t.closed = true
	return errors.Join(errs...)
}

// Layout of struct event in nltrace.c.
const (
	evHeader  = 8 + 8 + 4*8 + 16 // ts, id, pid, tid, netns, kind, len, captured, offset, pad, comm
	evDataMax = 512
	rtmsgSize = 12
)

func parseRawNetlink(raw []byte) (rawNetlink, error) {
	if len(raw) < evHeader+evDataMax {
		return rawNetlink{}, fmt.Errorf("netlink route trace: short record (%d bytes)", len(raw))
	}
	ne := binary.NativeEndian
	r := rawNetlink{
		at:     int64(ne.Uint64(raw[0:])),
		id:     ne.Uint64(raw[8:]),
		pid:    int(ne.Uint32(raw[16:])),
		tid:    int(ne.Uint32(raw[20:])),
		netns:  uint64(ne.Uint32(raw[24:])),
		recv:   ne.Uint32(raw[28:]) == 2,
		len:    ne.Uint32(raw[32:]),
		offset: ne.Uint32(raw[40:]),
		comm:   strings.TrimRight(string(raw[48:64]), "\x00"),
	}
	captured := min(ne.Uint32(raw[36:]), evDataMax)
	r.data = append([]byte(nil), raw[evHeader:evHeader+int(captured)]...)
	return r, nil
}

// netlinkMessages splits b into netlink messages (header, payload), stopping
// at the first that does not fit: b may be cut short.
func netlinkMessages(b []byte) (hdrs []unix.NlMsghdr, payloads [][]byte) {
	ne := binary.NativeEndian
	for len(b) >= unix.SizeofNlMsghdr {
		h := unix.NlMsghdr{Len: ne.Uint32(b[0:]), Type: ne.Uint16(b[4:]), Flags: ne.Uint16(b[6:]), Seq: ne.Uint32(b[8:]), Pid: ne.Uint32(b[12:])}
		if h.Len < unix.SizeofNlMsghdr {
			break
		}
		end := min(int(h.Len), len(b))
		hdrs, payloads = append(hdrs, h), append(payloads, b[unix.SizeofNlMsghdr:end])
		step := (int(h.Len) + 3) &^ 3
		if step > len(b) {
			break
		}
		b = b[step:]
	}
	return hdrs, payloads
}

// pairRequests turns the records into route requests, each with the first
// ack after it that the same process received for its sequence number.
func pairRequests(raw []rawNetlink) []RouteRequest {
	var out []RouteRequest
	for i, r := range raw {
		if r.recv {
			continue
		}
		hdrs, payloads := netlinkMessages(r.data)
		for k, h := range hdrs {
			if h.Type != unix.RTM_NEWROUTE && h.Type != unix.RTM_DELROUTE {
				continue
			}
			req := parseRouteRequest(h, payloads[k])
			req.At, req.PID, req.TID, req.Comm, req.NetNS = r.at, r.pid, r.tid, r.comm, r.netns
			// The last request seen of a send cut short: what followed it
			// (the rest of a batch longer than the trace copies) is missing.
			req.Truncated = req.Truncated || (k == len(hdrs)-1 && (int(h.Len) > len(r.data) || int(r.len) > len(r.data)))
			req.Seq = h.Seq
			for _, a := range raw[i+1:] {
				if !a.recv || a.pid != r.pid {
					continue
				}
				if errno, ok := ackFor(a.data, h); ok {
					req.Answered, req.AckAt, req.Errno = true, a.at, errno
					break
				}
			}
			out = append(out, req)
		}
	}
	return out
}

// ackFor finds in received bytes b the ack (NLMSG_ERROR) of request h:
// its echoed header carries h's sequence number and type.
func ackFor(b []byte, h unix.NlMsghdr) (syscall.Errno, bool) {
	ne := binary.NativeEndian
	hdrs, payloads := netlinkMessages(b)
	for k, a := range hdrs {
		p := payloads[k]
		if a.Type != unix.NLMSG_ERROR || len(p) < 4+unix.SizeofNlMsghdr {
			continue
		}
		if seq, typ := ne.Uint32(p[4+8:]), ne.Uint16(p[4+4:]); seq != h.Seq || typ != h.Type {
			continue
		}
		if e := int32(ne.Uint32(p[0:])); e < 0 {
			return syscall.Errno(-e), true
		}
		return 0, true
	}
	return 0, false
}

// parseRouteRequest reads the rtmsg and attributes of one request.
func parseRouteRequest(h unix.NlMsghdr, p []byte) RouteRequest {
	ne := binary.NativeEndian
	r := RouteRequest{Type: h.Type, Flags: h.Flags}
	if len(p) < rtmsgSize {
		r.Truncated = true
		return r
	}
	r.Family, r.Table, r.Protocol, r.RouteType = p[0], uint32(p[4]), p[5], p[7]
	dstLen := int(p[1])
	dst := netip.IPv4Unspecified()
	if r.Family == unix.AF_INET6 {
		dst = netip.IPv6Unspecified()
	}
	for a := p[rtmsgSize:]; len(a) >= 4; {
		l, typ := int(ne.Uint16(a[0:])), ne.Uint16(a[2:])
		if l < 4 || l > len(a) {
			break
		}
		v := a[4:l]
		switch typ {
		case unix.RTA_DST:
			if ip, ok := netip.AddrFromSlice(v); ok {
				dst = ip
			}
		case unix.RTA_GATEWAY:
			if ip, ok := netip.AddrFromSlice(v); ok {
				r.Gateway = ip
			}
		case unix.RTA_PRIORITY:
			if len(v) >= 4 {
				r.Metric, r.HasMetric = ne.Uint32(v), true
			}
		case unix.RTA_TABLE:
			if len(v) >= 4 {
				r.Table = ne.Uint32(v)
			}
		case unix.RTA_OIF:
			if len(v) >= 4 {
				r.OIF = int(ne.Uint32(v))
			}
		}
		step := (l + 3) &^ 3
		if step > len(a) {
			break
		}
		a = a[step:]
	}
	if pfx, err := dst.Prefix(dstLen); err == nil {
		r.Dst = pfx
	}
	return r
}

// RouteRequests is a list of traced route requests, with filters.
type RouteRequests []RouteRequest

func (rs RouteRequests) filter(keep func(RouteRequest) bool) RouteRequests {
	var out RouteRequests
	for _, r := range rs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// To keeps the requests for destination p.
func (rs RouteRequests) To(p netip.Prefix) RouteRequests {
	return rs.filter(func(r RouteRequest) bool { return r.Dst == p })
}

// Deletes keeps the RTM_DELROUTE requests; Adds the RTM_NEWROUTE ones.
func (rs RouteRequests) Deletes() RouteRequests {
	return rs.filter(func(r RouteRequest) bool { return r.Op() == "del" })
}

func (rs RouteRequests) Adds() RouteRequests {
	return rs.filter(func(r RouteRequest) bool { return r.Op() == "add" })
}

// From keeps the requests sent by host pid pid.
func (rs RouteRequests) From(pid int) RouteRequests {
	return rs.filter(func(r RouteRequest) bool { return r.PID == pid })
}

// Between keeps the requests sent in [from, to) (monotonic ns; to 0: no end).
func (rs RouteRequests) Between(from, to int64) RouteRequests {
	return rs.filter(func(r RouteRequest) bool { return r.At >= from && (to == 0 || r.At < to) })
}

// WithProtocol keeps the requests that name protocol p.
func (rs RouteRequests) WithProtocol(p kroute.Protocol) RouteRequests {
	return rs.filter(func(r RouteRequest) bool { return kroute.Protocol(r.Protocol) == p })
}

// Answered keeps the requests whose ack the sender received with errno e
// (0: accepted).
func (rs RouteRequests) Answered(e syscall.Errno) RouteRequests {
	return rs.filter(func(r RouteRequest) bool { return r.Answered && r.Errno == e })
}

// Unanswered keeps the requests whose ack the trace has not seen (yet).
func (rs RouteRequests) Unanswered() RouteRequests {
	return rs.filter(func(r RouteRequest) bool { return !r.Answered })
}

// Strings is one line per request, for failure messages and notes.
func (rs RouteRequests) Strings() []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}
