// Package timeline owns the route timeline: a netlink monitor per network
// namespace that records every route add, replace and delete (RTM_NEWROUTE,
// RTM_DELROUTE) with its CLOCK_MONOTONIC time (internal/monoclock), prefix,
// protocol, metric, table, type, devices, gateways/multipath nexthops and
// flags, and answers questions about it: was there any instant with no route
// to a prefix, how often did its route or owner protocol change in a window,
// which routes does each protocol own now.
//
// A Monitor starts before the event under test (Start returns once it has
// read the existing routes) and keeps working while interfaces come and go:
// IPv4 routes the kernel removes without a notification (device down or
// deleted) are found by re-reading the tables and recorded as Resync
// deletes; a failed subscription is re-established the same way, and the
// interval in which it may have missed changes is recorded as a gap (a
// GapKind event, Gaps, Judgeable): every window, delete or flap question
// over a span that overlaps a gap answers "unjudgeable", never "clean",
// since a delete and re-add inside it left no event. Its dumps
// go through nsutil.Dump: one that concurrent changes interrupted is redone,
// never taken as the table (a partial dump would look like deletes) nor
// reported as an error.
//
// Times are when the monitor received the notification, a few microseconds
// to a millisecond after the kernel acted (milliseconds on a loaded
// machine). Sync closes the race that opens: once it returns, every change
// the kernel made before the call is recorded, so an instant taken then (a
// harness mark) is later than all their stamps.
//
// It must not change routes or interfaces, and must not know which component
// owns which protocol beyond naming the well-known numbers.
package timeline
