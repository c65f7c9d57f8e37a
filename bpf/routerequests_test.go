package bpf

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/birdcage/birdcage/internal/kroute"
	"golang.org/x/sys/unix"
)

// The filters a spec judges a route trace with: each keeps exactly what its
// name says, and they compose.
func TestRouteRequestsFilters(t *testing.T) {
	a, b := netip.MustParsePrefix("10.65.0.0/26"), netip.MustParsePrefix("10.65.0.64/26")
	rs := RouteRequests{
		{At: 10, PID: 1, Type: unix.RTM_NEWROUTE, Dst: a, Protocol: 12, Answered: true},
		{At: 20, PID: 1, Type: unix.RTM_DELROUTE, Dst: a, Protocol: 12, Answered: true, Errno: syscall.ESRCH},
		{At: 30, PID: 2, Type: unix.RTM_DELROUTE, Dst: a, Protocol: 80, Answered: true},
		{At: 40, PID: 1, Type: unix.RTM_DELROUTE, Dst: b, Protocol: 12},
	}
	for _, c := range []struct {
		name string
		got  RouteRequests
		want []int64 // At of the requests kept
	}{
		{"To", rs.To(a), []int64{10, 20, 30}},
		{"Deletes", rs.Deletes(), []int64{20, 30, 40}},
		{"Adds", rs.Adds(), []int64{10}},
		{"From", rs.From(1), []int64{10, 20, 40}},
		{"Between", rs.Between(20, 40), []int64{20, 30}},
		{"Between no end", rs.Between(30, 0), []int64{30, 40}},
		{"WithProtocol", rs.WithProtocol(kroute.ProtoBIRD), []int64{10, 20, 40}},
		{"Answered ok", rs.Answered(0), []int64{10, 30}},
		{"Answered ESRCH", rs.Answered(syscall.ESRCH), []int64{20}},
		{"Unanswered", rs.Unanswered(), []int64{40}},
		{"composed", rs.To(a).Deletes().From(1).WithProtocol(kroute.ProtoBIRD).Answered(syscall.ESRCH), []int64{20}},
	} {
		var at []int64
		for _, r := range c.got {
			at = append(at, r.At)
		}
		if len(at) != len(c.want) {
			t.Errorf("%s: kept %v, want %v", c.name, at, c.want)
			continue
		}
		for i := range at {
			if at[i] != c.want[i] {
				t.Errorf("%s: kept %v, want %v", c.name, at, c.want)
				break
			}
		}
	}
	if s := rs.Strings(); len(s) != 4 || s[1] != (RouteRequest(rs[1])).String() {
		t.Errorf("Strings: %q", s)
	}
}
