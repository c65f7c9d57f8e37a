package nsutil

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// DumpAttempts is how many times Dump asks the kernel for a table before it
// gives up on getting a consistent one. A dump is interrupted only when the
// table changed while it was being read, so an attempt fails only under a
// change in that window; ten in a row means changes come faster than one
// dump takes, which is worth an error rather than an endless loop.
const DumpAttempts = 10

// Dump runs a netlink dump (a route, link or address list) until it comes
// back without the kernel's dump-interrupted flag (NLM_F_DUMP_INTR, surfaced
// by the netlink library as netlink.ErrDumpInterrupted, with partial results
// that may miss or repeat entries), at most DumpAttempts times. Any other
// error is returned at once, prefixed with what. After the last interrupted attempt it returns
// that attempt's (inconsistent) result and an error that says so and still
// matches netlink.ErrDumpInterrupted.
//
// dump must start from scratch on every call: whatever it fills in has to be
// reset inside it.
func Dump[T any](what string, dump func() (T, error)) (T, error) {
	return dumpN(DumpAttempts, what, dump)
}

func dumpN[T any](attempts int, what string, dump func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range attempts {
		v, err = dump()
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, fmt.Errorf("%s: %w", what, err)
		}
	}
	return v, fmt.Errorf("%s: dump interrupted by concurrent changes %d times in a row: %w", what, attempts, err)
}

// Links lists h's links, retrying interrupted dumps (see Dump).
func Links(h *netlink.Handle) ([]netlink.Link, error) {
	return Dump("list links", h.LinkList)
}

// Routes lists h's routes of one family matching filter (netlink.RT_FILTER_*
// in mask; nil filter for all), retrying interrupted dumps (see Dump).
func Routes(h *netlink.Handle, family int, filter *netlink.Route, mask uint64) ([]netlink.Route, error) {
	if filter == nil {
		// netlink (v1.3.1) dereferences the filter whatever the mask.
		filter, mask = &netlink.Route{}, 0
	}
	return Dump("list routes", func() ([]netlink.Route, error) {
		return h.RouteListFiltered(family, filter, mask)
	})
}

// Addrs lists h's addresses of one family on link (nil for every link),
// retrying interrupted dumps (see Dump).
func Addrs(h *netlink.Handle, link netlink.Link, family int) ([]netlink.Addr, error) {
	return Dump("list addresses", func() ([]netlink.Addr, error) {
		return h.AddrList(link, family)
	})
}
