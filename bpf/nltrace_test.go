package bpf

// The route trace must report what a process asked the kernel and what the
// kernel answered — family, destination, protocol, metric, table, flags,
// sender and errno — for requests acting on the traced namespace, and
// nothing of another namespace. Requests are made by hand with iproute2, as
// a person would, so the sender is a real process the test knows.

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// ipIn runs `ip ARGS` in namespace name and returns its pid and error.
func ipIn(t *testing.T, name string, args ...string) (int, error) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"-n", name}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		err = fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return cmd.Process.Pid, err
}

func mustIP(t *testing.T, name string, args ...string) int {
	t.Helper()
	pid, err := ipIn(t, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func startTrace(t *testing.T, path string) *RouteTracer {
	t.Helper()
	tr, err := TraceRoutes(path)
	testenv.SkipIfMissing(t, err, "netlink route trace")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	})
	return tr
}

// byPID keeps the events one process sent.
func byPID(evs []RouteRequest, pid int) []RouteRequest {
	var out []RouteRequest
	for _, e := range evs {
		if e.PID == pid {
			out = append(out, e)
		}
	}
	return out
}

func oneEvent(t *testing.T, tr *RouteTracer, pid int, what string) RouteRequest {
	t.Helper()
	evs, err := tr.Events()
	if err != nil {
		t.Fatal(err)
	}
	got := byPID(evs, pid)
	if len(got) != 1 {
		t.Fatalf("%s: want 1 route request from pid %d, got %d: %v (all: %v)", what, pid, len(got), got, evs)
	}
	return got[0]
}

func TestRouteTraceSeesRequestsAndAnswers(t *testing.T) {
	r := testenv.NewRun(t)
	a, b := testenv.NetNSIn(t, r, "a"), testenv.NetNSIn(t, r, "b")
	for _, n := range []*testenv.NetNS{a, b} {
		mustIP(t, n.Name, "link", "set", "lo", "up")
	}
	tr := startTrace(t, a.NS.Path())
	ino, err := NetNSInode(a.NS.Path())
	if err != nil {
		t.Fatal(err)
	}
	if tr.NetNS() != ino {
		t.Fatalf("tracer follows netns %d, want %d", tr.NetNS(), ino)
	}

	// An add with every field set, then the same add again (EEXIST).
	pid := mustIP(t, a.Name, "route", "add", "192.0.2.0/24", "dev", "lo", "proto", "99", "metric", "7", "table", "100")
	add := oneEvent(t, tr, pid, "ip route add")
	want := RouteRequest{Type: unix.RTM_NEWROUTE, Family: unix.AF_INET, Dst: netip.MustParsePrefix("192.0.2.0/24"),
		Protocol: 99, Metric: 7, HasMetric: true, Table: 100, RouteType: unix.RTN_UNICAST}
	if add.Type != want.Type || add.Family != want.Family || add.Dst != want.Dst || add.Protocol != want.Protocol ||
		add.Metric != want.Metric || !add.HasMetric || add.Table != want.Table || add.RouteType != want.RouteType || !add.Answered || add.Errno != 0 {
		t.Errorf("add seen as %v, want %v answered ok", add, want)
	}
	if add.Flags&(unix.NLM_F_CREATE|unix.NLM_F_EXCL) != unix.NLM_F_CREATE|unix.NLM_F_EXCL {
		t.Errorf("add flags %#x, want CREATE|EXCL (iproute2's route add)", add.Flags)
	}
	if add.Comm != "ip" || add.NetNS != ino || add.OIF == 0 || add.At == 0 {
		t.Errorf("add: comm %q netns %d oif %d at %d, want ip, %d, lo's index, a time", add.Comm, add.NetNS, add.OIF, add.At, ino)
	}
	pid, err = ipIn(t, a.Name, "route", "add", "192.0.2.0/24", "dev", "lo", "proto", "99", "metric", "7", "table", "100")
	if err == nil {
		t.Fatal("a second identical add succeeded")
	}
	if e := oneEvent(t, tr, pid, "repeated add"); !e.Answered || e.Errno != syscall.EEXIST {
		t.Errorf("repeated add answered %v, want EEXIST", e)
	}

	// A delete naming another protocol misses (ESRCH); naming the route's
	// own protocol it succeeds.
	pid, err = ipIn(t, a.Name, "route", "del", "192.0.2.0/24", "proto", "98", "metric", "7", "table", "100")
	if err == nil {
		t.Fatal("a delete with the wrong protocol succeeded")
	}
	miss := oneEvent(t, tr, pid, "delete, wrong protocol")
	if miss.Type != unix.RTM_DELROUTE || miss.Op() != "del" || miss.Protocol != 98 || !miss.Answered || miss.Errno != syscall.ESRCH || miss.Dst != want.Dst || miss.Table != 100 {
		t.Errorf("wrong-protocol delete seen as %v, want del %s proto 98 table 100 answered ESRCH", miss, want.Dst)
	}
	pid = mustIP(t, a.Name, "route", "del", "192.0.2.0/24", "proto", "99", "metric", "7", "table", "100")
	if del := oneEvent(t, tr, pid, "delete"); del.Type != unix.RTM_DELROUTE || del.Protocol != 99 || !del.Answered || del.Errno != 0 || del.Metric != 7 {
		t.Errorf("delete seen as %v, want del proto 99 metric 7 answered ok", del)
	}

	// IPv6, main table.
	pid = mustIP(t, a.Name, "-6", "route", "add", "2001:db8:1::/64", "dev", "lo", "proto", "99", "metric", "9")
	if e := oneEvent(t, tr, pid, "ip -6 route add"); e.Family != unix.AF_INET6 || e.Dst != netip.MustParsePrefix("2001:db8:1::/64") ||
		e.Protocol != 99 || e.Metric != 9 || e.Table != unix.RT_TABLE_MAIN || e.Errno != 0 {
		t.Errorf("IPv6 add seen as %v, want add 2001:db8:1::/64 proto 99 metric 9 table main ok", e)
	}

	// Another namespace's requests are not a's.
	pid = mustIP(t, b.Name, "route", "add", "198.51.100.0/24", "dev", "lo", "proto", "99")
	evs, err := tr.Events()
	if err != nil {
		t.Fatal(err)
	}
	if got := byPID(evs, pid); len(got) != 0 {
		t.Errorf("a's trace saw b's request: %v", got)
	}
	for _, e := range evs {
		if e.NetNS != ino {
			t.Errorf("event of netns %d in a trace of %d: %v", e.NetNS, ino, e)
		}
	}
	// ... while a trace of b sees them.
	trb := startTrace(t, b.NS.Path())
	pid = mustIP(t, b.Name, "route", "del", "198.51.100.0/24", "proto", "99")
	if e := oneEvent(t, trb, pid, "delete in b"); e.Errno != 0 || e.Dst != netip.MustParsePrefix("198.51.100.0/24") {
		t.Errorf("b's trace: %v", e)
	}
	evs, _ = tr.Events()
	if got := byPID(evs, pid); len(got) != 0 {
		t.Errorf("a's trace saw b's delete: %v", got)
	}
	if d, err := tr.Dropped(); err != nil || d != 0 {
		t.Errorf("dropped %d (%v), want 0", d, err)
	}

	for _, e := range evs {
		t.Logf("a: %v", e)
	}

	// Close detaches: nothing more is recorded, what was stays readable.
	n := len(evs)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	mustIP(t, a.Name, "route", "add", "203.0.113.0/24", "dev", "lo")
	after, err := tr.Events()
	if err != nil || len(after) != n {
		t.Errorf("after Close: %d events (%v), want the %d recorded before", len(after), err, n)
	}
}

// The pairing of requests with acks, on hand-made netlink bytes (no root).
func TestRouteRequestsPairWithTheirAcks(t *testing.T) {
	if _, err := parseRawNetlink(make([]byte, 10)); err == nil {
		t.Error("a short record parsed")
	}
	ne := binary.NativeEndian
	nlmsg := func(typ, flags uint16, seq uint32, payload []byte) []byte {
		b := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(payload))
		ne.PutUint32(b[0:], uint32(unix.SizeofNlMsghdr+len(payload)))
		ne.PutUint16(b[4:], typ)
		ne.PutUint16(b[6:], flags)
		ne.PutUint32(b[8:], seq)
		return append(b, payload...)
	}
	attr := func(typ uint16, v []byte) []byte {
		b := make([]byte, 4, 8+len(v))
		ne.PutUint16(b[0:], uint16(4+len(v)))
		ne.PutUint16(b[2:], typ)
		b = append(b, v...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	u32 := func(v uint32) []byte { b := make([]byte, 4); ne.PutUint32(b, v); return b }
	rt := []byte{unix.AF_INET, 26, 0, 0, unix.RT_TABLE_MAIN, 12, 0, unix.RTN_UNICAST, 0, 0, 0, 0}
	rt = append(rt, attr(unix.RTA_DST, []byte{10, 65, 1, 64})...)
	rt = append(rt, attr(unix.RTA_PRIORITY, u32(32))...)
	rt = append(rt, attr(unix.RTA_GATEWAY, []byte{10, 0, 0, 3})...)
	del := nlmsg(unix.RTM_DELROUTE, unix.NLM_F_REQUEST|unix.NLM_F_ACK, 7, rt)
	ack := func(seq uint32, errno int32) []byte {
		echo := nlmsg(unix.RTM_DELROUTE, 0, seq, nil)
		return nlmsg(unix.NLMSG_ERROR, 0, seq, append(u32(uint32(errno)), echo...))
	}
	raw := []rawNetlink{
		{at: 1, pid: 10, data: del},
		{at: 2, pid: 11, recv: true, data: ack(7, -int32(syscall.EEXIST))}, // another process's
		{at: 3, pid: 10, recv: true, data: ack(6, 0)},                      // another request's
		{at: 4, pid: 10, recv: true, data: ack(7, -int32(syscall.ESRCH))},
		{at: 5, pid: 10, data: nlmsg(unix.RTM_NEWROUTE, unix.NLM_F_REQUEST, 8, rt[:12])},
	}
	got := pairRequests(raw)
	if len(got) != 2 {
		t.Fatalf("got %d requests, want 2: %v", len(got), got)
	}
	d := got[0]
	if d.Op() != "del" || d.Dst != netip.MustParsePrefix("10.65.1.64/26") || d.Protocol != 12 || d.Metric != 32 ||
		d.Gateway != netip.MustParseAddr("10.0.0.3") || d.Table != unix.RT_TABLE_MAIN || !d.Answered || d.AckAt != 4 || d.Errno != syscall.ESRCH {
		t.Errorf("delete paired as %v (ack at %d)", d, d.AckAt)
	}
	if a := got[1]; a.Op() != "add" || a.Answered || a.Dst != netip.MustParsePrefix("0.0.0.0/26") {
		t.Errorf("unacked add read as %v", a)
	}
}

// A batch of requests in one sendto (longer than one record) with the acks
// read by recvmmsg, as the route programmer's writer does: every request is
// seen, each paired with its own ack.
func TestRouteTraceJoinsBatchesAndReadsRecvmmsg(t *testing.T) {
	a := testenv.NewNetNS(t, "a")
	mustIP(t, a.Name, "link", "set", "lo", "up")
	tr := startTrace(t, a.NS.Path())
	const n = 20
	ne := binary.NativeEndian
	var batch []byte
	for i := range n {
		m := make([]byte, 16+12, 64)
		m[16], m[17], m[16+4], m[16+5], m[16+6], m[16+7] = unix.AF_INET, 32, unix.RT_TABLE_MAIN, 99, unix.RT_SCOPE_LINK, unix.RTN_UNICAST
		m = append(m, 8, 0, unix.RTA_DST, 0, 192, 0, 2, byte(i+1))
		m = append(m, 8, 0, unix.RTA_OIF, 0, 1, 0, 0, 0) // lo
		ne.PutUint32(m[0:], uint32(len(m)))
		ne.PutUint16(m[4:], unix.RTM_NEWROUTE)
		ne.PutUint16(m[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
		ne.PutUint32(m[8:], uint32(1000+i))
		batch = append(batch, m...)
	}
	if len(batch) <= evDataMax {
		t.Fatalf("batch of %d bytes does not span records", len(batch))
	}
	got := 0
	err := a.NS.Do(func(_ ns.NetNS) error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return err
		}
		if err := unix.Sendto(fd, batch, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return err
		}
		type mmsg struct {
			hdr unix.Msghdr
			n   uint32
		}
		bufs := make([][]byte, 8)
		iovs := make([]unix.Iovec, 8)
		mm := make([]mmsg, 8)
		for k := range mm {
			bufs[k] = make([]byte, 4096)
			iovs[k].Base = &bufs[k][0]
			iovs[k].SetLen(len(bufs[k]))
			mm[k].hdr.Iov = &iovs[k]
			mm[k].hdr.SetIovlen(1)
		}
		for got < n {
			r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&mm[0])), uintptr(len(mm)), unix.MSG_WAITFORONE, 0, 0)
			if e != 0 {
				return e
			}
			got += int(r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := tr.Events()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != n {
		t.Fatalf("saw %d requests of the batch of %d: %v", len(evs), n, evs)
	}
	for i, e := range evs {
		want := netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), 32)
		if e.Dst != want || e.Seq != uint32(1000+i) || !e.Answered || e.Errno != 0 || e.Truncated || e.Protocol != 99 {
			t.Errorf("request %d of the batch: %v (seq %d, truncated %v), want add %s seq %d answered ok", i, e, e.Seq, e.Truncated, want, 1000+i)
		}
	}
}
