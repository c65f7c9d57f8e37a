// These root tests hold, as literal kernel requests, what Felix's route
// table sends in each release on the transitions of a takeover, and check
// that the table sends the same. The requests are observed with the netlink
// route trace (bpf.TraceRoutes), which records what a process asked the
// kernel and how the kernel answered, in order.
//
// Facts, read on the release branches of projectcalico/calico:
//   - Write order: every delete of a pass goes before any replace
//     (felix/routetable/route_table.go applyUpdates: deletions loop, then
//     the RouteReplace loop) on release-v3.31 3cdeae8f7ace, release-v3.32
//     de60d98e97a7 and release-v3.33 6609dea54713.
//   - Route key: destination, TOS and priority; the key of a desired route
//     has priority 0 for IPv4 and 1024 for IPv6, and a replace names that
//     priority (3.31 routeKeyForCIDR; 3.32 and 3.33 normalizeRouteKey; the
//     replace sets Priority from the key, which the netlink library sends
//     as RTA_PRIORITY only when not 0).
//   - A delete names table, destination, TOS and priority, with protocol 0,
//     scope nowhere and type 0: wildcards (route_table.go deleteRoute, all
//     three).
//   - Ownership: a main-table route with the programmer's protocol (80 by
//     default) is Felix's on any device (ownershippol RouteIsOurs, the
//     exclusive protocol check, all three). BIRD's single-hop routes via
//     tunl0 are Felix's only in 3.33 and only when it owns IPIP cluster
//     routes (OwnBIRDIPIPRoutes, release-v3.33 only).
//   - IPIP routes carry the IPIP MTU, host MTU - 20 unless set
//     (dataplane/linux/ipip_mgr.go tunnelRoute MTU; int_dataplane.go
//     ConfigureDefaultMTUs, all three).
//
// BIRD's metric is the other half: 0 in 3.31, 1024 from 3.32 on (the
// renderer's side of issue 25). A 3.32 BIRD's route and Felix's are then
// two kernel routes; a 3.33 Felix deletes BIRD's before it adds its own.
package routetable

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/dataplane/calc"
	"github.com/birdcage/birdcage/dataplane/route"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// tracedNode is a test node with the netlink route trace running on it.
type tracedNode struct {
	*testNode
	tr   *bpf.RouteTracer
	seen int // requests of ours already returned by since
}

func newTracedNode(t *testing.T) *tracedNode {
	t.Helper()
	tn := newTestNode(t)
	tr, err := bpf.TraceRoutes(tn.ns.Path())
	testenv.SkipIfMissing(t, err, "netlink route trace")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return &tracedNode{testNode: tn, tr: tr}
}

// in runs f on a thread inside the node's namespace: the trace records the
// requests of threads in the traced namespace, so the table's writes must
// be sent from one.
func (tn *tracedNode) in(t *testing.T, f func()) {
	t.Helper()
	if err := tn.ns.Do(func(ns.NetNS) error { f(); return nil }); err != nil {
		t.Fatal(err)
	}
}

// since returns this process's route requests recorded since the last call,
// each as "op dst proto P [metric M] [via GW] [dev D] [replace]: result".
func (tn *tracedNode) since(t *testing.T) []string {
	t.Helper()
	evs, err := tn.tr.Events()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	n := 0
	for _, e := range evs {
		if e.PID != os.Getpid() {
			continue
		}
		n++
		if n <= tn.seen {
			continue
		}
		out = append(out, tn.format(e))
	}
	tn.seen = n
	return out
}

func (tn *tracedNode) format(e bpf.RouteRequest) string {
	s := fmt.Sprintf("%s %s proto %d", e.Op(), e.Dst, e.Protocol)
	if e.HasMetric {
		s += fmt.Sprintf(" metric %d", e.Metric)
	}
	if e.Gateway.IsValid() {
		s += " via " + e.Gateway.String()
	}
	if e.OIF != 0 {
		dev := fmt.Sprintf("if%d", e.OIF)
		if l, err := tn.h.LinkByIndex(e.OIF); err == nil {
			dev = l.Attrs().Name
		}
		s += " dev " + dev
	}
	if e.Flags&unix.NLM_F_REPLACE != 0 {
		s += " replace"
	}
	switch {
	case !e.Answered:
		s += ": no ack"
	case e.Errno == 0:
		s += ": ok"
	default:
		s += ": " + unix.ErrnoName(e.Errno)
	}
	return s
}

// kernelRoutes lists the main table's routes to dst as "proto P metric M
// [mtu U]", sorted.
func (tn *testNode) kernelRoutes(t *testing.T, dst string) []string {
	t.Helper()
	p := netip.MustParsePrefix(dst)
	fam := netlink.FAMILY_V4
	if p.Addr().Is6() {
		fam = netlink.FAMILY_V6
	}
	rs, err := tn.h.RouteListFiltered(fam, &netlink.Route{Table: MainTable}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		if r.Dst == nil || r.Dst.String() != p.String() {
			continue
		}
		s := fmt.Sprintf("proto %d metric %d", r.Protocol, r.Priority)
		if r.MTU != 0 {
			s += fmt.Sprintf(" mtu %d", r.MTU)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func expectLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// TestKernelRequestsPerRelease drives the table through a takeover of a
// BIRD route, a withdrawal and a resync that finds strays, for each
// release's programmer against the BIRD metric of the release it meets, and
// asserts every kernel request in order.
func TestKernelRequestsPerRelease(t *testing.T) {
	const (
		dst   = "10.65.2.0/26"
		stray = "10.65.9.0/26" // a block released while the node was down
		other = "10.68.9.0/26" // proto 80 on a device that is not ours
		add   = "add 10.65.2.0/26 proto 80 via 10.0.1.12 dev tunl0 replace: ok"
	)
	for _, tc := range []struct {
		name       string
		rel        config.Release
		owner      config.ProgramClusterRoutes
		birdMetric int
		knobs      func(*Options)
		takeover   []string // requests of the first pass
		after      []string // the kernel's routes to dst after it
		withdraw   []string // nothing desired
		left       []string // routes to dst left after the withdrawal
		resync     []string // a resync finding strays
	}{{
		// 3.31 BIRD writes at metric 0: the same key as Felix's route, so
		// one replace takes it (3cdeae8f7ace).
		name: "3.31 programmer, 3.31 BIRD at metric 0", rel: config.R331, owner: config.Enabled, birdMetric: 0,
		takeover: []string{add},
		after:    []string{"proto 80 metric 0 mtu 1480"},
		withdraw: []string{"del 10.65.2.0/26 proto 0: ok"},
		resync:   []string{"del 10.68.9.0/26 proto 0: ok"},
	}, {
		// 3.32 BIRD writes at 1024: Felix's replace at 0 adds a second
		// route, and BIRD's is not Felix's to delete (de60d98e97a7).
		name: "3.32 programmer, 3.32 BIRD at metric 1024", rel: config.R332, owner: config.Enabled, birdMetric: 1024,
		takeover: []string{add},
		after:    []string{"proto 12 metric 1024", "proto 80 metric 0 mtu 1480"},
		withdraw: []string{"del 10.65.2.0/26 proto 0: ok"},
		left:     []string{"proto 12 metric 1024"},
		resync:   []string{"del 10.68.9.0/26 proto 0: ok"},
	}, {
		// The upgrade 3.32 -> 3.33: the 3.33 programmer owns BIRD's route
		// via tunl0 at 1024, which is not the key it wants, so it deletes
		// it first and adds its own after: a moment with no route
		// (6609dea54713).
		name: "3.33 programmer, 3.32 BIRD at metric 1024", rel: config.R333, owner: config.EnabledIPIPOnly, birdMetric: 1024,
		takeover: []string{"del 10.65.2.0/26 proto 0 metric 1024: ok", add},
		after:    []string{"proto 80 metric 0 mtu 1480"},
		withdraw: []string{"del 10.65.2.0/26 proto 0: ok"},
		resync:   []string{"del 10.65.9.0/26 proto 0 metric 1024: ok", "del 10.68.9.0/26 proto 0: ok"},
	}, {
		// The upgrade 3.31 -> 3.33: BIRD's route is at Felix's key, so the
		// replace takes it with no delete.
		name: "3.33 programmer, 3.31 BIRD at metric 0", rel: config.R333, owner: config.EnabledIPIPOnly, birdMetric: 0,
		takeover: []string{add},
		after:    []string{"proto 80 metric 0 mtu 1480"},
		withdraw: []string{"del 10.65.2.0/26 proto 0: ok"},
		resync:   []string{"del 10.65.9.0/26 proto 0: ok", "del 10.68.9.0/26 proto 0: ok"},
	}, {
		// Knob: birdcage's old replace-first order closes the gap of the
		// 3.32 -> 3.33 upgrade; no release does this.
		name: "3.33 programmer, 3.32 BIRD, replace-first knob", rel: config.R333, owner: config.EnabledIPIPOnly, birdMetric: 1024,
		knobs:    func(o *Options) { o.WriteOrder = config.ReplaceFirst },
		takeover: []string{add, "del 10.65.2.0/26 proto 0 metric 1024: ok"},
		after:    []string{"proto 80 metric 0 mtu 1480"},
		withdraw: []string{"del 10.65.2.0/26 proto 0: ok"},
		resync:   []string{"del 10.65.9.0/26 proto 0 metric 1024: ok", "del 10.68.9.0/26 proto 0: ok"},
	}, {
		// Knob: deletes naming their route's protocol, birdcage's old way.
		name: "3.33 programmer, 3.32 BIRD, protocol-named deletes", rel: config.R333, owner: config.EnabledIPIPOnly, birdMetric: 1024,
		knobs:    func(o *Options) { o.DeleteNamesProtocol = true; o.TunnelMTU = 0 },
		takeover: []string{"del 10.65.2.0/26 proto 12 metric 1024: ok", add},
		after:    []string{"proto 80 metric 0"},
		withdraw: []string{"del 10.65.2.0/26 proto 80: ok"},
		resync:   []string{"del 10.65.9.0/26 proto 12 metric 1024: ok", "del 10.68.9.0/26 proto 80: ok"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTracedNode(t)
			tn.addRoute(t, dst, "10.0.1.12", "tunl0", int(kroute.ProtoBIRD), tc.birdMetric, true)
			tb := tn.table(t, NewOwnershipPolicy(80, "tunl0", []string{"eth0", "eth1"}, tc.owner, tc.rel), testLog(t))
			opts := OptionsFor(tc.rel, 1500)
			if tc.knobs != nil {
				tc.knobs(&opts)
			}
			tb.SetOptions(opts)
			pass := func(full bool) {
				t.Helper()
				tn.in(t, func() {
					var st Stats
					var err error
					if full {
						st, err = tb.Resync()
					} else {
						st, err = tb.Apply()
					}
					if err != nil || st.Failed != 0 {
						t.Errorf("pass: %+v %v", st, err)
					}
				})
			}
			tn.since(t) // the setup's own writes

			// 1. Takeover: the programmer wants dst.
			tb.SetDesired([]route.Route{tunnelRoute(dst)})
			pass(false)
			expectLines(t, "takeover requests", tn.since(t), tc.takeover)
			expectLines(t, "routes to "+dst+" after the takeover", tn.kernelRoutes(t, dst), tc.after)

			// 2. Withdraw: nothing desired.
			tb.SetDesired(nil)
			pass(false)
			expectLines(t, "withdrawal requests", tn.since(t), tc.withdraw)
			expectLines(t, "routes to "+dst+" after the withdrawal", tn.kernelRoutes(t, dst), tc.left)

			// 3. Resync: BIRD's leftover for a released block at its
			// metric, and a proto 80 route on a device that is not ours.
			tn.addRoute(t, stray, "10.0.1.13", "tunl0", int(kroute.ProtoBIRD), tc.birdMetric, true)
			tn.addRoute(t, other, "10.9.0.2", "ext0", 80, 0, false)
			tn.since(t)
			pass(true)
			expectLines(t, "resync requests", tn.since(t), tc.resync)
		})
	}
}

// TestIPv6KeyMatchesBIRD: on IPv6 BIRD's route and the programmer's both sit
// at 1024, so the takeover is one replace naming metric 1024, in every
// release (3.31 routeKeyForCIDR; 3.32, 3.33 normalizeRouteKey).
func TestIPv6KeyMatchesBIRD(t *testing.T) {
	for _, rel := range []config.Release{config.R331, config.R332, config.R333} {
		t.Run(string(rel), func(t *testing.T) {
			tn := newTracedNode(t)
			const dst = "fd00:67:0:2::/122"
			tn.addRoute(t, dst, "fd00:1::12", "eth0", int(kroute.ProtoBIRD), 1024, false)
			tb := tn.table(t, NewOwnershipPolicy(80, "tunl0", []string{"eth0"}, config.Enabled, rel), testLog(t))
			tb.SetOptions(OptionsFor(rel, 1500))
			tn.since(t)
			tb.SetDesired([]route.Route{{Dst: netip.MustParsePrefix(dst), Class: route.ClassNoEncap,
				NextHops: []route.NextHop{{Gateway: netip.MustParseAddr("fd00:1::12"), Device: "eth0"}}}})
			tn.in(t, func() {
				if st, err := tb.Apply(); err != nil || st.Replaced != 1 {
					t.Errorf("apply: %+v %v", st, err)
				}
			})
			expectLines(t, "requests", tn.since(t), []string{"add fd00:67:0:2::/122 proto 80 metric 1024 via fd00:1::12 dev eth0 replace: ok"})
			expectLines(t, "routes", tn.kernelRoutes(t, dst), []string{"proto 80 metric 1024"})
		})
	}
}

// TestUpgradeWindowDeleteFirst measures, from the route trace, how long each
// block is without a route when a 3.33 programmer takes over N blocks that a
// 3.32 BIRD left at metric 1024 via tunl0: delete-first (Felix's order)
// deletes BIRD's route before it adds its own at 0. For each block the
// window lies between "its delete was sent" and "its add was acknowledged";
// requests of one send share a send time, so the lower bound is per send.
// The replace-first knob is run beside it: its adds go before the deletes,
// so no block is ever without a route.
func TestUpgradeWindowDeleteFirst(t *testing.T) {
	for _, n := range []int{1, 100, 1000} {
		for _, v := range []struct {
			name   string
			order  config.WriteOrder
			window int
		}{
			{"delete-first, one request at a time (3.33)", config.DeleteFirst, 0},
			{"delete-first, 48 per send (knob)", config.DeleteFirst, 48},
			{"replace-first (knob)", config.ReplaceFirst, 0},
		} {
			order := v.order
			t.Run(fmt.Sprintf("%d blocks, %s", n, v.name), func(t *testing.T) {
				tn := newTracedNode(t)
				tun := tn.ifindex(t, "tunl0")
				var desired []route.Route
				for i := range n {
					dst := fmt.Sprintf("10.%d.%d.%d/26", 65+i/1024, (i/4)%256, (i%4)*64)
					desired = append(desired, tunnelRoute(dst))
					_, ipn, _ := net.ParseCIDR(dst)
					if err := tn.h.RouteAdd(&netlink.Route{Dst: ipn, Gw: net.ParseIP("10.0.1.12"), LinkIndex: tun,
						Protocol: netlink.RouteProtocol(kroute.ProtoBIRD), Priority: 1024, Flags: int(netlink.FLAG_ONLINK)}); err != nil {
						t.Fatal(err)
					}
				}
				tb := tn.table(t, NewOwnershipPolicy(80, "tunl0", []string{"eth0"}, config.EnabledIPIPOnly, config.R333), quietLog())
				opts := OptionsFor(config.R333, 1500)
				opts.WriteOrder = order
				if v.window > 0 {
					// The trace copies 8 × 512 bytes of a send; 48 requests
					// (at most ~64 bytes each) fit, 256 would not.
					opts.WriteWindow = v.window
				}
				tb.SetOptions(opts)
				tn.since(t)
				tb.SetDesired(desired)
				tn.in(t, func() {
					if st, err := tb.Apply(); err != nil || st.Failed != 0 || st.Deleted != n || st.Added != n {
						t.Errorf("apply: %+v %v", st, err)
					}
				})
				evs, err := tn.tr.Events()
				if err != nil {
					t.Fatal(err)
				}
				if d, _ := tn.tr.Dropped(); d > 0 {
					t.Fatalf("trace dropped %d records", d)
				}
				type pair struct{ del, add *bpf.RouteRequest }
				per := map[netip.Prefix]*pair{}
				for i := range evs {
					e := &evs[i]
					if e.PID != os.Getpid() || e.Type == 0 {
						continue
					}
					p := per[e.Dst]
					if p == nil {
						p = &pair{}
						per[e.Dst] = p
					}
					if e.Type == unix.RTM_DELROUTE && e.Metric == 1024 {
						p.del = e
					} else if e.Type == unix.RTM_NEWROUTE {
						p.add = e
					}
				}
				var lo, hi []int64
				unanswered := 0 // acks the trace did not pair (they come many to a datagram)
				for _, d := range desired {
					p := per[d.Dst]
					if p == nil || p.del == nil || p.add == nil {
						t.Fatalf("%s: want a delete of BIRD's route and an add, traced: %+v", d.Dst, p)
					}
					if p.del.Errno != 0 || p.add.Errno != 0 {
						t.Errorf("%s: refused: %v / %v", d.Dst, p.del, p.add)
					}
					if order == config.ReplaceFirst {
						if p.add.At > p.del.At || (p.add.At == p.del.At && p.add.Seq > p.del.Seq) {
							t.Errorf("%s: replace-first sent the delete first", d.Dst)
						}
						continue
					}
					if p.add.At < p.del.At || (p.add.At == p.del.At && p.add.Seq < p.del.Seq) {
						t.Errorf("%s: delete-first sent the add first", d.Dst)
					}
					lo = append(lo, p.add.At-p.del.At)
					if p.add.Answered {
						hi = append(hi, p.add.AckAt-p.del.At)
					} else {
						unanswered++
					}
				}
				if order == config.ReplaceFirst {
					t.Logf("%d blocks, replace-first: every add sent before its delete; no block without a route", n)
					return
				}
				if len(hi) == 0 {
					t.Fatalf("no add's acknowledgement was traced")
				}
				slices.Sort(lo)
				slices.Sort(hi)
				us := func(ns int64) string { return fmt.Sprintf("%.1fµs", float64(ns)/1e3) }
				t.Logf("%d blocks, %s: no-route window per block: lower bound median %s max %s; upper bound median %s max %s (%d of %d acks traced)",
					n, v.name, us(lo[len(lo)/2]), us(lo[len(lo)-1]), us(hi[len(hi)/2]), us(hi[len(hi)-1]), len(hi), n)
			})
		}
	}
}

// TestUpgradeWindowProbe measures the same window with traffic instead of
// the trace: while a 3.33 table takes over 1000 blocks from a 3.32 BIRD's
// metric-1024 routes, a sender in the node's namespace sends UDP datagrams
// round-robin to three of the blocks (the first, middle and last in write
// order); a send that finds no route fails at once with ENETUNREACH. The
// window of a block is the span of its failed sends, a lower bound (the
// sender samples; on a shared 2-core machine it is also descheduled). No
// trace is attached.
func TestUpgradeWindowProbe(t *testing.T) {
	const n = 1000
	for _, v := range []struct {
		name   string
		order  config.WriteOrder
		window int
	}{
		{"delete-first, one request at a time (3.33)", config.DeleteFirst, 0},
		{"delete-first, pipelined (knob)", config.DeleteFirst, 256},
		{"replace-first (knob)", config.ReplaceFirst, 0},
	} {
		t.Run(v.name, func(t *testing.T) {
			tn := newTestNode(t)
			tun := tn.ifindex(t, "tunl0")
			l, _ := tn.h.LinkByIndex(tun)
			if err := tn.h.LinkSetARPOff(l); err != nil {
				t.Fatal(err)
			}
			var desired []route.Route
			for i := range n {
				dst := fmt.Sprintf("10.%d.%d.%d/26", 65+i/1024, (i/4)%256, (i%4)*64)
				desired = append(desired, tunnelRoute(dst))
				_, ipn, _ := net.ParseCIDR(dst)
				if err := tn.h.RouteAdd(&netlink.Route{Dst: ipn, Gw: net.ParseIP("10.0.1.12"), LinkIndex: tun,
					Protocol: netlink.RouteProtocol(kroute.ProtoBIRD), Priority: 1024, Flags: int(netlink.FLAG_ONLINK)}); err != nil {
					t.Fatal(err)
				}
			}
			probed := []netip.Prefix{desired[0].Dst, desired[n/2].Dst, desired[n-1].Dst}
			tb := tn.table(t, NewOwnershipPolicy(80, "tunl0", []string{"eth0"}, config.EnabledIPIPOnly, config.R333), quietLog())
			opts := OptionsFor(config.R333, 1500)
			opts.WriteOrder = v.order
			if v.window > 0 {
				opts.WriteWindow = v.window
			}
			tb.SetOptions(opts)
			tb.SetDesired(desired)

			// The sender: its own thread in the namespace, until stop.
			type miss struct{ first, last time.Time }
			misses := make([]miss, len(probed))
			sent := 0
			stop, ready, done := make(chan struct{}), make(chan error, 1), make(chan struct{})
			go func() {
				defer close(done)
				ready <- tn.ns.Do(func(ns.NetNS) error {
					fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
					if err != nil {
						return err
					}
					defer unix.Close(fd)
					sas := make([]unix.Sockaddr, len(probed))
					for i, p := range probed {
						a := p.Addr().As4()
						a[3]++
						sas[i] = &unix.SockaddrInet4{Port: 9, Addr: a}
					}
					ready <- nil
					for {
						select {
						case <-stop:
							return nil
						default:
						}
						for i, sa := range sas {
							err := unix.Sendto(fd, []byte("probe"), unix.MSG_DONTWAIT, sa)
							sent++
							if errors.Is(err, unix.ENETUNREACH) {
								now := time.Now()
								if misses[i].first.IsZero() {
									misses[i].first = now
								}
								misses[i].last = now
							}
						}
						// A rate loop: leave the CPU to the table between
						// rounds (the machine has two cores, shared).
						time.Sleep(20 * time.Microsecond)
					}
				})
			}()
			if err := <-ready; err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if st, err := tb.Apply(); err != nil || st.Failed != 0 || st.Added != n {
				t.Errorf("apply: %+v %v", st, err)
			}
			pass := time.Since(start)
			close(stop)
			<-done
			<-ready
			var out []string
			for i, m := range misses {
				if m.first.IsZero() {
					out = append(out, probed[i].String()+" none")
					continue
				}
				out = append(out, fmt.Sprintf("%s %.1fms", probed[i], float64(m.last.Sub(m.first).Microseconds())/1e3))
			}
			t.Logf("%s, %d blocks: pass %.1fms, %d sends; failed-send span per probed block (lower bound): %s",
				v.name, n, float64(pass.Microseconds())/1e3, sent, strings.Join(out, ", "))
			if v.order == config.ReplaceFirst {
				for i, m := range misses {
					if !m.first.IsZero() {
						t.Errorf("replace-first: %s had no route for a moment", probed[i])
					}
				}
			}
		})
	}
}

// TestNoEncapRouteIsOnlink: Felix writes its no-encap routes `onlink`. Its
// route table gives every TargetTypeNoEncap target RTNH_F_ONLINK
// (felix/routetable/defs.go Target.Flags, at release-v3.31 3cdeae8f7ace,
// release-v3.32 de60d98e97a7 and release-v3.33 6609dea54713), and
// dataplane/linux/route_mgr.go noEncapRoute builds no-encap routes as that
// type; real Felix 3.33 wrote `10.65.2.0/26 via 10.99.0.12 dev <uplink>
// proto 80 onlink`. The routes are the calculation's (calc.DesiredRoutes),
// applied by the table, read back with iproute2. The takeover of BIRD's
// route at the same key (metric 0, no onlink, as the fork writes it) must
// end onlink too: the flag is part of the route the table compares.
func TestNoEncapRouteIsOnlink(t *testing.T) {
	for _, rel := range []config.Release{config.R331, config.R332, config.R333} {
		t.Run(string(rel), func(t *testing.T) {
			tn := newTestNode(t)
			c := &datastore.Cluster{
				Pools: []datastore.IPPool{{Name: "flat", CIDR: "10.65.0.0/16", IPIPMode: datastore.EncapNever, VXLANMode: datastore.EncapNever},
					{Name: "flat6", CIDR: "fd00:67::/48", IPIPMode: datastore.EncapNever, VXLANMode: datastore.EncapNever}},
				Nodes: []datastore.Node{
					{Name: "node-1", IPv4Address: "10.0.1.11/24", IPv6Address: "fd00:1::11/64"},
					{Name: "node-2", IPv4Address: "10.0.1.12/24", IPv6Address: "fd00:1::12/64"},
				},
				Blocks: []datastore.BlockAffinity{{CIDR: "10.65.2.0/26", Node: "node-2"}, {CIDR: "fd00:67:0:2::/122", Node: "node-2"}},
			}
			res := calc.DesiredRoutes(c, "node-1", config.Enabled, calc.Options{Uplinks: []datastore.Uplink{
				{Interface: "eth0", Address: "10.0.1.11/24"}, {Interface: "eth0", Address: "fd00:1::11/64"}}})
			if len(res.Routes) != 2 {
				t.Fatalf("guard: the calculation should want two no-encap routes, got %v (skipped %+v)", res.Routes, res.Skipped)
			}
			// BIRD's IPv4 route at the programmer's key, as the fork writes it
			// (taken over by one replace); the IPv6 route is a plain add.
			tn.addRoute(t, "10.65.2.0/26", "10.0.1.12", "eth0", int(kroute.ProtoBIRD), 0, false)
			tb := tn.table(t, NewOwnershipPolicy(80, "tunl0", []string{"eth0"}, config.Enabled, rel), testLog(t))
			tb.SetOptions(OptionsFor(rel, 1500))
			tb.SetDesired(res.Routes)
			if st, err := tb.Apply(); err != nil || st.Replaced != 1 || st.Added != 1 {
				t.Fatalf("apply: %+v %v", st, err)
			}
			show := func(args ...string) string {
				out, err := exec.Command("ip", append([]string{"-n", tn.name}, args...)...).CombinedOutput()
				if err != nil {
					t.Fatalf("ip %v: %v: %s", args, err, out)
				}
				return strings.TrimSpace(string(out))
			}
			expectLines(t, "IPv4 no-encap route", []string{show("-4", "route", "show", "10.65.2.0/26")},
				[]string{"10.65.2.0/26 via 10.0.1.12 dev eth0 proto 80 onlink"})
			expectLines(t, "IPv6 no-encap route", []string{show("-6", "route", "show", "fd00:67:0:2::/122")},
				[]string{"fd00:67:0:2::/122 via fd00:1::12 dev eth0 proto 80 metric 1024 onlink pref medium"})
			// Control: a route written without the flag reads without it,
			// so the reading above is the flag's, not iproute2's.
			tn.addRoute(t, "10.65.3.0/26", "10.0.1.12", "eth0", int(kroute.ProtoBIRD), 0, false)
			expectLines(t, "control: BIRD's route", []string{show("-4", "route", "show", "10.65.3.0/26")},
				[]string{"10.65.3.0/26 via 10.0.1.12 dev eth0 proto bird"})
		})
	}
}
