package bpf

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// TunnelOptions says where to attach an emulated IPIP tunnel (tunnel.c).
type TunnelOptions struct {
	Netns string // path of the node's network namespace
	// Device is the emulated tunnel device (a NOARP veth), "tunl0", and
	// Peer the other end of its veth, in the same namespace: the
	// encapsulation runs at Peer's ingress, so what Device sends is seen on
	// Device as on a real tunnel (packet sockets, its egress hook).
	Device, Peer string
	// Underlays are the node's underlay devices: the decapsulation program
	// runs at their ingress. Encapsulated packets leave by whichever device
	// the route to the far end names, not only these.
	Underlays []string
	// NoEncap is the negative control: packets routed via the tunnel leave
	// toward the same next hop un-encapsulated.
	NoEncap bool
	// Legacy forces clsact + cls_bpf where TCX works.
	Legacy bool
}

// Tunnel is an emulated IPIP tunnel attached in one namespace. Close
// detaches it.
type Tunnel struct {
	opts    TunnelOptions
	mode    string
	coll    *ebpf.Collection
	stats   *ebpf.Map
	detach  []func() error
	closed  bool
	Ifindex int // of Device
}

// TunnelStats is what the tunnel programs did, summed over CPUs.
type TunnelStats struct {
	Encap      uint64 `json:"encap"`
	Decap      uint64 `json:"decap"`
	NotIPv4    uint64 `json:"notIPv4"`    // dropped at the device: not IPv4
	NoRoute    uint64 `json:"noRoute"`    // dropped at the device: no route via it
	NoUnderlay uint64 `json:"noUnderlay"` // dropped at the device: the far end is unreachable
	Loop       uint64 `json:"loop"`       // dropped: the far end is routed via the tunnel itself
	Errors     uint64 `json:"errors"`     // dropped: a helper failed
	ECNDrop    uint64 `json:"ecnDrop"`    // dropped at decap: CE outer, Not-ECT inner
	Plain      uint64 `json:"plain"`      // sent un-encapsulated (NoEncap)
	BadInner   uint64 `json:"badInner"`   // dropped at decap: the inner packet is not IPv4
}

// tunnelPrio is the cls_bpf priority of the encapsulation on the clsact
// path (the decapsulation's is one more): after every counter (0xbc00 and
// up), so counters see the packet as it arrived at the hook before the
// tunnel redirects it.
const tunnelPrio = 0xfff0

// AttachTunnel loads tunnel.c for o.Device and attaches its encapsulation
// at o.Peer's ingress and its decapsulation at each underlay's ingress,
// TCX first (after any program already there), clsact otherwise.
func AttachTunnel(o TunnelOptions) (_ *Tunnel, err error) {
	what := fmt.Sprintf("attach the emulated tunnel %s in %s", o.Device, o.Netns)
	if err := memlockOnce(); err != nil {
		return nil, fmt.Errorf("%s: raise memlock rlimit for BPF: %w", what, err)
	}
	n, err := ns.GetNS(o.Netns)
	if err != nil {
		return nil, fmt.Errorf("%s: open netns: %w", what, err)
	}
	defer n.Close()
	h, err := netlink.NewHandleAt(netns.NsHandle(n.Fd()), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("%s: netlink handle: %w", what, err)
	}
	defer h.Close()
	dev, err := h.LinkByName(o.Device)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	peer, err := h.LinkByName(o.Peer)
	if err != nil {
		return nil, fmt.Errorf("%s: peer: %w", what, err)
	}
	var unders []netlink.Link
	for _, u := range o.Underlays {
		l, err := h.LinkByName(u)
		if err != nil {
			return nil, fmt.Errorf("%s: underlay: %w", what, err)
		}
		unders = append(unders, l)
	}
	t, err := newTunnel(dev.Attrs().Index, dev.Attrs().HardwareAddr, o.NoEncap)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	t.opts = o
	defer func() {
		if err != nil {
			_ = t.Close()
		}
	}()
	encap, decap := t.coll.Programs[tunnelProgTunnelEncap], t.coll.Programs[tunnelProgTunnelDecap]
	if err := t.attach(n, peer, encap, Ingress, tunnelPrio); err != nil {
		return nil, fmt.Errorf("%s: %s ingress: %w", what, o.Peer, err)
	}
	for _, u := range unders {
		if err := t.attach(n, u, decap, Ingress, tunnelPrio+1); err != nil {
			return nil, fmt.Errorf("%s: %s ingress: %w", what, u.Attrs().Name, err)
		}
	}
	return t, nil
}

// newTunnel loads the programs for the device with this ifindex and MAC,
// unattached.
func newTunnel(ifindex int, mac net.HardwareAddr, noEncap bool) (*Tunnel, error) {
	spec, err := loadTunnel()
	if err != nil {
		return nil, err
	}
	var cfg tunnelTunnelConfig
	cfg.TunlIfindex = uint32(ifindex)
	copy(cfg.TunlMac[:], mac)
	if noEncap {
		cfg.NoEncap = 1
	}
	if err := spec.Variables[tunnelVarCfg].Set(cfg); err != nil {
		return nil, fmt.Errorf("configure tunnel program: %w", err)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load tunnel programs: %+v", ve)
		}
		return nil, fmt.Errorf("load tunnel programs: %w", err)
	}
	return &Tunnel{coll: coll, stats: coll.Maps[tunnelMapTunnelStats], Ifindex: ifindex}, nil
}

func (t *Tunnel) attach(n ns.NetNS, l netlink.Link, prog *ebpf.Program, dir Direction, prio uint16) error {
	if !t.opts.Legacy {
		at := ebpf.AttachTCXIngress
		if dir == Egress {
			at = ebpf.AttachTCXEgress
		}
		var lk link.Link
		err := n.Do(func(ns.NetNS) error {
			var err error
			lk, err = link.AttachTCX(link.TCXOptions{Interface: l.Attrs().Index, Program: prog, Attach: at, Anchor: link.Tail()})
			return err
		})
		if err == nil {
			t.mode = ModeTCX
			t.detach = append(t.detach, lk.Close)
			return nil
		}
		if !errors.Is(err, ebpf.ErrNotSupported) {
			return fmt.Errorf("tcx: %w", err)
		}
	}
	h, err := netlink.NewHandleAt(netns.NsHandle(n.Fd()), unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	idx := l.Attrs().Index
	qdisc := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	created := true
	if err := h.QdiscAdd(qdisc); errors.Is(err, unix.EEXIST) {
		created = false
	} else if err != nil {
		h.Close()
		return fmt.Errorf("add clsact qdisc: %w", err)
	}
	parent := uint32(netlink.HANDLE_MIN_INGRESS)
	if dir == Egress {
		parent = netlink.HANDLE_MIN_EGRESS
	}
	filter := &netlink.BpfFilter{
		FilterAttrs:  netlink.FilterAttrs{LinkIndex: idx, Parent: parent, Handle: netlink.MakeHandle(0, 1), Protocol: unix.ETH_P_ALL, Priority: prio},
		Fd:           prog.FD(),
		Name:         "birdcage_tunnel",
		DirectAction: true,
	}
	if err := h.FilterAdd(filter); err != nil {
		if created {
			_ = h.QdiscDel(qdisc)
		}
		h.Close()
		return fmt.Errorf("add cls_bpf filter: %w", err)
	}
	t.mode = ModeClsact
	t.detach = append(t.detach, func() error {
		defer h.Close()
		return detachClsact(h, l, filter, qdisc, created)
	})
	return nil
}

// Mode is ModeTCX or ModeClsact.
func (t *Tunnel) Mode() string { return t.mode }

// Stats reads what the programs did so far.
func (t *Tunnel) Stats() (TunnelStats, error) {
	var s TunnelStats
	fields := []*uint64{&s.Encap, &s.Decap, &s.NotIPv4, &s.NoRoute, &s.NoUnderlay, &s.Loop, &s.Errors, &s.ECNDrop, &s.Plain, &s.BadInner}
	for i, f := range fields {
		var per []uint64
		if err := t.stats.Lookup(uint32(i), &per); err != nil {
			return s, fmt.Errorf("read tunnel stats in %s: %w", t.opts.Netns, err)
		}
		for _, v := range per {
			*f += v
		}
	}
	return s, nil
}

// Close detaches the programs (last attached first) and frees them. Safe to
// call twice.
func (t *Tunnel) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	for i := len(t.detach) - 1; i >= 0; i-- {
		if err := t.detach[i](); err != nil {
			errs = append(errs, err)
		}
	}
	t.coll.Close()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detach the emulated tunnel in %s: %w", t.opts.Netns, err)
	}
	return nil
}
