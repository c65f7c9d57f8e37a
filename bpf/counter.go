package bpf

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Direction is the TC hook a Counter is attached to.
type Direction int

const (
	Ingress Direction = iota
	Egress
)

func (d Direction) String() string {
	if d == Egress {
		return "egress"
	}
	return "ingress"
}

// MarshalText makes a Direction read as "ingress"/"egress" in JSON.
func (d Direction) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// AttachOptions says where to attach a Counter.
type AttachOptions struct {
	Netns     string // path of the network namespace, e.g. /var/run/netns/bc1a2b3c-node-1
	Iface     string // interface name inside Netns
	Direction Direction
	// Legacy forces the clsact + cls_bpf path even where TCX works, to
	// exercise the fallback used on kernels before 6.6.
	Legacy bool
	// MaxProbeFlows sizes the probe tracker map (one entry per probe flow
	// the counter sees; a full map stops tracking new flows) and, at four
	// times that (at least 1024), the LRU map of per-address-pair counters,
	// which also sees non-probe traffic. 0: DefaultMaxProbeFlows. The
	// tracker map is preallocated, so its size is memory locked per counter
	// whether used or not: a cluster of N nodes carries several counters
	// per node, so size it from the flow plan.
	MaxProbeFlows int
}

// DefaultMaxProbeFlows is the tracker map's size when AttachOptions leaves
// it unset (the size compiled into counter.c).
const DefaultMaxProbeFlows = 4096

// mapSizes returns the tracker and flow-counter map sizes for o.
func (o AttachOptions) mapSizes() (tracks, flows uint32) {
	if o.MaxProbeFlows <= 0 {
		return DefaultMaxProbeFlows, 4 * DefaultMaxProbeFlows
	}
	return uint32(o.MaxProbeFlows), uint32(max(1024, 4*o.MaxProbeFlows))
}

// Attach modes reported by Counter.Mode.
const (
	ModeTCX    = "tcx"
	ModeClsact = "clsact"
)

// Counter is the TC program attached at one interface direction, with its
// own maps. Close detaches it.
type Counter struct {
	opts AttachOptions
	mode string
	l3   bool

	coll   *ebpf.Collection
	prog   *ebpf.Program
	flows  *ebpf.Map
	tracks *ebpf.Map

	mu     sync.Mutex
	closed bool
	detach func() error
}

var memlockOnce = sync.OnceValue(rlimit.RemoveMemlock)

// load loads the program variant for devices with (l3 false) or without (l3
// true) an Ethernet header, with fresh maps, unattached.
func load(l3 bool, o AttachOptions) (*Counter, error) {
	if err := memlockOnce(); err != nil {
		return nil, fmt.Errorf("raise memlock rlimit for BPF: %w", err)
	}
	spec, err := loadCounter()
	if err != nil {
		return nil, err
	}
	want, drop := counterProgCountEth, counterProgCountL3
	if l3 {
		want, drop = drop, want
	}
	delete(spec.Programs, drop)
	tracks, flows := o.mapSizes()
	spec.Maps[counterMapProbeTracks].MaxEntries = tracks
	spec.Maps[counterMapFlowCounters].MaxEntries = flows
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load BPF counter %s: %+v", want, ve)
		}
		return nil, fmt.Errorf("load BPF counter %s: %w", want, err)
	}
	return &Counter{
		l3:     l3,
		coll:   coll,
		prog:   coll.Programs[want],
		flows:  coll.Maps[counterMapFlowCounters],
		tracks: coll.Maps[counterMapProbeTracks],
	}, nil
}

// Attach loads a Counter and attaches it to o.Iface in o.Netns: TCX first,
// clsact + direct-action cls_bpf when TCX is not supported (or o.Legacy).
func Attach(o AttachOptions) (*Counter, error) {
	what := fmt.Sprintf("attach BPF counter to %s %s in %s", o.Iface, o.Direction, o.Netns)
	n, err := ns.GetNS(o.Netns)
	if err != nil {
		return nil, fmt.Errorf("%s: open netns: %w", what, err)
	}
	defer n.Close()
	h, err := netlink.NewHandleAt(netns.NsHandle(n.Fd()), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("%s: netlink handle: %w", what, err)
	}
	lk, err := h.LinkByName(o.Iface)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	c, err := load(!hasEthernetHeader(lk), o)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	c.opts = o
	if !o.Legacy {
		err = c.attachTCX(n, lk.Attrs().Index)
		if err == nil {
			h.Close()
			return c, nil
		}
		if !errors.Is(err, ebpf.ErrNotSupported) {
			h.Close()
			c.coll.Close()
			return nil, fmt.Errorf("%s: tcx: %w", what, err)
		}
	}
	// The handle stays open for Close: it deletes the filter in this netns
	// even after the netns lost its name.
	var st unix.Stat_t
	if err := unix.Fstat(int(n.Fd()), &st); err != nil {
		h.Close()
		c.coll.Close()
		return nil, fmt.Errorf("%s: netns: %w", what, err)
	}
	key := clsactKey{dev: uint64(st.Dev), ino: st.Ino, ifindex: lk.Attrs().Index}
	if err := c.attachClsact(h, lk, key); err != nil {
		h.Close()
		c.coll.Close()
		return nil, fmt.Errorf("%s: clsact: %w", what, err)
	}
	return c, nil
}

// hasEthernetHeader reports whether TC programs on l see an Ethernet header
// before the IP header (veth, bridge, lo) or the IP header first (ipip).
func hasEthernetHeader(l netlink.Link) bool {
	switch l.Attrs().EncapType {
	case "ether", "loopback":
		return true
	}
	return false
}

func (c *Counter) attachTCX(n ns.NetNS, ifindex int) error {
	at := ebpf.AttachTCXIngress
	if c.opts.Direction == Egress {
		at = ebpf.AttachTCXEgress
	}
	var lk link.Link
	// The kernel resolves the ifindex in the calling thread's netns, so the
	// attach must run on a thread inside n; ns.Do locks one for the call.
	err := n.Do(func(ns.NetNS) error {
		var err error
		lk, err = link.AttachTCX(link.TCXOptions{
			Interface: ifindex,
			Program:   c.prog,
			Attach:    at,
			// First on the hook: an emulated tunnel's program (tunnel.go)
			// redirects the packet, and a counter behind it would never
			// see it. Counters never change a packet, so their own order
			// does not matter.
			Anchor: link.Head(),
		})
		return err
	})
	if err != nil {
		return err
	}
	c.mode = ModeTCX
	c.detach = lk.Close
	return nil
}

// clsactKey names an interface in a network namespace.
type clsactKey struct {
	dev, ino uint64 // the namespace's
	ifindex  int
}

// ourQdiscs counts, per interface, the attached counters that share a
// clsact qdisc birdcage added there (an ingress and an egress counter on
// one device, say): the last of them to detach removes it, whichever
// order they close in, so the namespace is left as found.
var (
	ourQdiscsMu sync.Mutex
	ourQdiscs   = map[clsactKey]int{}
)

func (c *Counter) attachClsact(h *netlink.Handle, lk netlink.Link, key clsactKey) error {
	ourQdiscsMu.Lock()
	defer ourQdiscsMu.Unlock()
	idx := lk.Attrs().Index
	qdisc := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	createdQdisc := true
	if err := h.QdiscAdd(qdisc); errors.Is(err, unix.EEXIST) {
		createdQdisc = false
	} else if err != nil {
		return fmt.Errorf("add clsact qdisc: %w", err)
	}
	if createdQdisc {
		// A qdisc of ours that outlived its counters (a crashed run) is
		// not counted; one made now is.
		ourQdiscs[key] = 0
	}
	_, shares := ourQdiscs[key]
	parent := uint32(netlink.HANDLE_MIN_INGRESS)
	if c.opts.Direction == Egress {
		parent = netlink.HANDLE_MIN_EGRESS
	}
	// A priority no other filter on this hook uses, so Close deletes
	// exactly ours.
	existing, err := h.FilterList(lk, parent)
	if err != nil {
		return fmt.Errorf("list filters: %w", err)
	}
	prio := uint16(0xbc00)
	for _, f := range existing {
		// Below the emulated tunnel's priority, which must run last.
		if p := f.Attrs().Priority; p >= prio && p < tunnelPrio-1 {
			prio = p + 1
		}
	}
	filter := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: idx,
			Parent:    parent,
			Handle:    netlink.MakeHandle(0, 1),
			Protocol:  unix.ETH_P_ALL,
			Priority:  prio,
		},
		Fd:           c.prog.FD(),
		Name:         "birdcage_counter",
		DirectAction: true,
	}
	if err := h.FilterAdd(filter); err != nil {
		if createdQdisc {
			delete(ourQdiscs, key)
			_ = h.QdiscDel(qdisc)
		}
		return fmt.Errorf("add cls_bpf filter: %w", err)
	}
	if shares {
		ourQdiscs[key]++
	}
	c.mode = ModeClsact
	c.detach = func() error {
		defer h.Close()
		ourQdiscsMu.Lock()
		defer ourQdiscsMu.Unlock()
		last := false
		if shares {
			ourQdiscs[key]--
			if last = ourQdiscs[key] <= 0; last {
				delete(ourQdiscs, key)
			}
		}
		return detachClsact(h, lk, filter, qdisc, last)
	}
	return nil
}

// Mode says how the Counter is attached: ModeTCX, ModeClsact, or "" when
// loaded without attaching (tests).
func (c *Counter) Mode() string { return c.mode }

// Where describes the attach point for messages.
func (c *Counter) Where() string {
	return fmt.Sprintf("%s %s in %s", c.opts.Iface, c.opts.Direction, c.opts.Netns)
}

// Close detaches the program and frees its maps. It is safe to call twice.
func (c *Counter) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var err error
	if c.detach != nil {
		if derr := c.detach(); derr != nil {
			err = fmt.Errorf("detach BPF counter from %s: %w", c.Where(), derr)
		}
	}
	c.coll.Close()
	return err
}

// FlowKey names a flow as the program sees it.
type FlowKey struct {
	Src   netip.Addr `json:"src"`
	Dst   netip.Addr `json:"dst"`
	Proto uint8      `json:"proto"`
	// Inner is set for the flow inside an IPIP packet (counted in addition
	// to the outer node-to-node flow with Proto 4).
	Inner bool `json:"inner,omitempty"`
}

// describe names a flow in messages. (Not String: FlowKey is embedded, and a
// promoted String would hide the counts when a FlowCount is printed.)
func (k FlowKey) describe() string {
	s := fmt.Sprintf("%s->%s proto %d", k.Src, k.Dst, k.Proto)
	if k.Inner {
		s += " (inner)"
	}
	return s
}

// FlowCount is what crossed the hook for one flow.
type FlowCount struct {
	FlowKey
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// ProbeTrack is the probe sequence tracker of one flow. Times are
// CLOCK_MONOTONIC nanoseconds of arrival at the hook.
type ProbeTrack struct {
	FlowKey
	Received   uint64 `json:"received"` // distinct probes, duplicates excluded
	HighestSeq uint64 `json:"highestSeq"`
	Missing    uint64 `json:"missing"`    // below HighestSeq and not seen
	Late       uint64 `json:"late"`       // arrived below the highest seen
	Duplicates uint64 `json:"duplicates"` // recognised within 64 of the highest
	FirstSeq   uint64 `json:"firstSeq"`   // seq of the first probe to arrive
	FirstNs    int64  `json:"firstNs"`
	LastNs     int64  `json:"lastNs"`
	LastSeq    uint64 `json:"lastSeq"`
	// MaxGapNs is the largest time between two consecutive arrivals; the
	// gap opened at MaxGapStartNs and closed with probe MaxGapEndSeq.
	MaxGapNs      int64  `json:"maxGapNs"`
	MaxGapStartNs int64  `json:"maxGapStartNs"`
	MaxGapEndSeq  uint64 `json:"maxGapEndSeq"`
	// MaxLateDepth is how far behind the highest sequence number the most
	// out-of-order late probe arrived (0: no reordering).
	MaxLateDepth uint64 `json:"maxLateDepth"`
}

func keyOf(k counterFlowKey) FlowKey {
	fk := FlowKey{Proto: k.Proto, Inner: k.Inner != 0}
	if k.Family == 4 {
		fk.Src = netip.AddrFrom4([4]byte(k.Saddr[:4]))
		fk.Dst = netip.AddrFrom4([4]byte(k.Daddr[:4]))
	} else {
		fk.Src = netip.AddrFrom16(k.Saddr)
		fk.Dst = netip.AddrFrom16(k.Daddr)
	}
	return fk
}

func rawKey(k FlowKey) counterFlowKey {
	var r counterFlowKey
	r.Proto = k.Proto
	if k.Inner {
		r.Inner = 1
	}
	if k.Src.Unmap().Is4() {
		r.Family = 4
		s, d := k.Src.Unmap().As4(), k.Dst.Unmap().As4()
		copy(r.Saddr[:], s[:])
		copy(r.Daddr[:], d[:])
	} else {
		r.Family = 6
		r.Saddr, r.Daddr = k.Src.As16(), k.Dst.As16()
	}
	return r
}

// Flows returns every flow counted so far.
func (c *Counter) Flows() ([]FlowCount, error) {
	var (
		k   counterFlowKey
		v   counterFlowCounters
		out []FlowCount
	)
	it := c.flows.Iterate()
	for it.Next(&k, &v) {
		out = append(out, FlowCount{FlowKey: keyOf(k), Packets: v.Packets, Bytes: v.Bytes})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read flow counters at %s: %w", c.Where(), err)
	}
	return out, nil
}

// Flow returns the counts of one flow (zero if it never crossed the hook).
func (c *Counter) Flow(k FlowKey) (FlowCount, error) {
	var v counterFlowCounters
	err := c.flows.Lookup(rawKey(k), &v)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return FlowCount{FlowKey: k}, nil
	}
	if err != nil {
		return FlowCount{}, fmt.Errorf("read flow %s at %s: %w", k.describe(), c.Where(), err)
	}
	return FlowCount{FlowKey: k, Packets: v.Packets, Bytes: v.Bytes}, nil
}

func trackOf(k FlowKey, v counterProbeTrack) ProbeTrack {
	return ProbeTrack{
		FlowKey:       k,
		Received:      v.Received,
		HighestSeq:    v.HighestSeq,
		Missing:       v.Missing,
		Late:          v.Late,
		Duplicates:    v.Duplicates,
		FirstSeq:      v.FirstSeq,
		FirstNs:       int64(v.FirstNs),
		LastNs:        int64(v.LastNs),
		LastSeq:       v.LastSeq,
		MaxGapNs:      int64(v.MaxGapNs),
		MaxGapStartNs: int64(v.MaxGapStartNs),
		MaxGapEndSeq:  v.MaxGapEndSeq,
		MaxLateDepth:  v.MaxLateDepth,
	}
}

// ProbeTrack returns the probe tracker of the UDP flow src->dst; ok is false
// if no probe of that flow crossed the hook.
func (c *Counter) ProbeTrack(src, dst netip.Addr, inner bool) (t ProbeTrack, ok bool, err error) {
	k := FlowKey{Src: src, Dst: dst, Proto: unix.IPPROTO_UDP, Inner: inner}
	var v counterProbeTrack
	err = c.tracks.LookupWithFlags(rawKey(k), &v, ebpf.LookupLock)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return ProbeTrack{FlowKey: k}, false, nil
	}
	if err != nil {
		return ProbeTrack{}, false, fmt.Errorf("read probe tracker %s at %s: %w", k.describe(), c.Where(), err)
	}
	return trackOf(k, v), true, nil
}

// ProbeTracks returns the trackers of every probe flow seen.
func (c *Counter) ProbeTracks() ([]ProbeTrack, error) {
	var (
		k    counterFlowKey
		keys []counterFlowKey
	)
	it := c.tracks.Iterate()
	var skip counterProbeTrack
	for it.Next(&k, &skip) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list probe trackers at %s: %w", c.Where(), err)
	}
	out := make([]ProbeTrack, 0, len(keys))
	for _, k := range keys {
		var v counterProbeTrack
		// Read again under the value's spin lock for a consistent copy.
		if err := c.tracks.LookupWithFlags(k, &v, ebpf.LookupLock); err != nil {
			return nil, fmt.Errorf("read probe tracker at %s: %w", c.Where(), err)
		}
		out = append(out, trackOf(keyOf(k), v))
	}
	return out, nil
}

// MapBytes is the memory the kernel charges for the counter's maps (the
// "memlock" of their fdinfo), or an error where the kernel does not say.
func (c *Counter) MapBytes() (int64, error) {
	var total int64
	for _, m := range []*ebpf.Map{c.tracks, c.flows} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", m.FD()))
		if err != nil {
			return 0, fmt.Errorf("BPF map memory: %w", err)
		}
		v, ok := fdinfoField(string(b), "memlock")
		if !ok {
			return 0, fmt.Errorf("BPF map memory: no memlock in fdinfo of map %d", m.FD())
		}
		total += v
	}
	return total, nil
}

func fdinfoField(s, name string) (int64, bool) {
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == name {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// detachClsact deletes a cls_bpf filter this package added and, when
// removeQdisc says the clsact qdisc was ours, the qdisc too — but only if
// nobody else's filter hangs on it. An interface that is gone (and its
// filters with it) is no error.
func detachClsact(h *netlink.Handle, l netlink.Link, filter netlink.Filter, qdisc netlink.Qdisc, removeQdisc bool) error {
	err := h.FilterDel(filter)
	if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete cls_bpf filter: %w", err)
	}
	if !removeQdisc {
		return nil
	}
	for _, p := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		if fs, err := h.FilterList(l, p); err != nil || len(fs) > 0 {
			return nil
		}
	}
	if err := h.QdiscDel(qdisc); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("delete clsact qdisc: %w", err)
	}
	return nil
}
