package topo

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/run"
)

// WorkloadGateway is the address every workload's default route points at,
// answered by the host side of its veth, as in Calico.
var WorkloadGateway = netip.MustParseAddr("169.254.1.1")

// WorkloadGateway6 is the IPv6 link-local gateway the host side of a
// workload veth answers for (the EUI-64 of HostVethMAC).
var WorkloadGateway6 = netip.MustParseAddr("fe80::ecee:eeff:feee:eeee")

// HostVethMAC is the MAC of every workload veth's host end, as in Calico.
var HostVethMAC = net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}

// TunnelDevice is the IPIP device name both route programmers use.
const TunnelDevice = "tunl0"

// Namespace is one network namespace of a built topology.
type Namespace struct {
	Name    string // name in the topology ("node-1")
	NetNS   string // netns name, with the run prefix ("bc1a2b3c-node-1"); empty when adopted
	Path    string // path to open or join (/var/run/netns/..., /proc/PID/ns/net)
	NS      ns.NetNS
	Adopted bool
}

// Handle opens a netlink handle inside the namespace.
func (n *Namespace) Handle() (*netlink.Handle, error) { return nsutil.Handle(n.NS) }

// NodeNS is a built node: its namespace, the topology's spec of it, and
// the facts derived when it was built (address, blocks, workloads).
type NodeNS struct {
	Namespace
	Spec Node
	// Address is the node's own address: its loopback, else its first
	// interface's address.
	Address   netip.Prefix
	Blocks    []Block
	Workloads []*Workload
	// Tunnel is true when the node has an up tunl0.
	Tunnel bool
	// TunnelMode is how its tunl0 is made (TunnelKernel, TunnelEBPF,
	// TunnelEBPFNoEncap), "" without one.
	TunnelMode string
}

// RouterNS is a built router or ToR.
type RouterNS struct {
	Namespace
	Spec Router
}

// Workload is one built workload (pod).
type Workload struct {
	Namespace
	Node      string
	HostIface string // cali... in the node's namespace
	Iface     string // eth0 in the workload's namespace
	IPv4      netip.Addr
	IPv6      netip.Addr // invalid when no IPv6 pool
}

// Network is a topology built in namespaces. Close (or the run's Close)
// removes everything it created; adopted namespaces are left as found apart
// from the workloads' veths, which go with the workloads.
type Network struct {
	Topology *Topology
	Run      *run.Run
	Nodes    []*NodeNS
	Routers  []*RouterNS
	Switches []*Namespace
	// Tunnel is how the nodes' tunl0 is made (TunnelKernel, TunnelEBPF,
	// TunnelEBPFNoEncap); "" when the topology has no IPIP pool.
	Tunnel string

	mu       sync.Mutex
	tunnels  []*bpf.Tunnel // the emulated tunl0s' programs
	created  []string      // netns names, for teardown
	closed   bool
	inflight sync.WaitGroup
}

// errClosed stops a build whose network was closed under it (Ctrl-C).
var errClosed = errors.New("network closed during build")

// Options tune a build.
type Options struct {
	// Features overrides kernel feature detection (tests).
	Features *Features
	// Parallel is how many namespaces are set up at once (default 8).
	Parallel int
	// Tunnel overrides how this network's tunl0s are made (TunnelEBPF,
	// TunnelEBPFNoEncap: the emulation even where the kernel has ipip, or
	// its negative control); "" as detected.
	Tunnel string
}

// Build validates t and builds it. On any error everything created so far
// is removed before Build returns. Teardown is also registered with r, so a
// panic or Ctrl-C that closes the run removes the network too.
func Build(ctx context.Context, t *Topology, r *run.Run, opts Options) (_ *Network, err error) {
	f := opts.Features
	if f == nil {
		detected, derr := DetectFeatures(r)
		if derr != nil {
			return nil, derr
		}
		f = &detected
	}
	if opts.Tunnel != "" {
		o := *f
		switch opts.Tunnel {
		case TunnelEBPF, TunnelEBPFNoEncap:
			o.IPIP, o.Tunnel, o.TunnelErr = true, opts.Tunnel, nil
		case TunnelKernel:
			if o.TunnelMode() != TunnelKernel {
				o.IPIP, o.TunnelErr = false, fmt.Errorf("topo.Options.Tunnel=%s, but tunl0 here is %s", TunnelKernel, o.TunnelMode())
			}
		default:
			return nil, fmt.Errorf("topo.Options.Tunnel: %q is not one of %s, %s, %s", opts.Tunnel, TunnelKernel, TunnelEBPF, TunnelEBPFNoEncap)
		}
		f = &o
	}
	if err := t.ValidateFor(*f); err != nil {
		return nil, err
	}
	blocks, err := t.allocateBlocks()
	if err != nil {
		return nil, err
	}
	par := opts.Parallel
	if par <= 0 {
		par = 8
	}
	net := &Network{Topology: t, Run: r}
	// Guard, not Defer: a run already closing (Ctrl-C during feature
	// detection) gets no network at all, instead of one its Close never sees.
	if err := r.Guard("network "+t.Name, net.Close); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = net.Close()
		}
	}()
	if t.NeedsTunnel() {
		net.Tunnel = f.TunnelMode()
	}
	b := &builder{net: net, r: r, blocks: blocks, par: par, f: *f}
	return net, b.build(ctx)
}

type builder struct {
	net    *Network
	r      *run.Run
	blocks map[string][]Block
	par    int
	f      Features
}

func (b *builder) group(ctx context.Context) (*errgroup.Group, context.Context) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(b.par)
	return g, gctx
}

func (b *builder) build(ctx context.Context) error {
	t := b.net.Topology
	// 1. Namespaces: switches, routers, nodes, then every node's workloads.
	for _, s := range t.Switches {
		b.net.Switches = append(b.net.Switches, &Namespace{Name: s.Name})
	}
	for _, rt := range t.Routers {
		b.net.Routers = append(b.net.Routers, &RouterNS{Namespace: Namespace{Name: rt.Name}, Spec: rt})
	}
	for _, n := range t.Nodes {
		node := &NodeNS{Namespace: Namespace{Name: n.Name}, Spec: n, Blocks: b.blocks[n.Name]}
		node.Address = nodeAddress(n)
		for i := range n.Workloads {
			wl := &Workload{Namespace: Namespace{Name: fmt.Sprintf("%s-w%d", n.Name, i)}, Node: n.Name, Iface: "eth0"}
			wl.HostIface = hostIfaceName(n.Name, i)
			wl.IPv4, wl.IPv6 = workloadAddrs(node.Blocks, i)
			node.Workloads = append(node.Workloads, wl)
		}
		b.net.Nodes = append(b.net.Nodes, node)
	}
	g, gctx := b.group(ctx)
	for _, s := range b.net.Switches {
		g.Go(func() error { return b.createNS(gctx, s, routerSysctls) })
	}
	for _, rt := range b.net.Routers {
		g.Go(func() error { return b.createNS(gctx, &rt.Namespace, routerSysctls) })
	}
	for _, n := range b.net.Nodes {
		g.Go(func() error {
			if n.Spec.Adopt != "" {
				return b.adoptNS(n)
			}
			return b.createNS(gctx, &n.Namespace, routerSysctls)
		})
		for _, wl := range n.Workloads {
			g.Go(func() error { return b.createNS(gctx, &wl.Namespace, workloadSysctls) })
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}

	// 2. Switches are bridges.
	g, gctx = b.group(ctx)
	for _, s := range b.net.Switches {
		g.Go(func() error { return withHandle(s, func(h *netlink.Handle) error { return makeBridge(h, s) }) })
	}
	if err := g.Wait(); err != nil {
		return err
	}

	// 3. Links: switch ports and point-to-point veths, one owner at a time
	// so each namespace's netlink work stays on one goroutine.
	owners := map[string]*Namespace{}
	for _, s := range b.net.Switches {
		owners[s.Name] = s
	}
	for _, rt := range b.net.Routers {
		owners[rt.Name] = &rt.Namespace
	}
	for _, n := range b.net.Nodes {
		owners[n.Name] = &n.Namespace
	}
	port := map[string]int{}
	type job struct {
		owner *Namespace
		ifs   []Interface
		ports []string
	}
	var jobs []job
	for _, rt := range b.net.Routers {
		jobs = append(jobs, job{owner: &rt.Namespace, ifs: rt.Spec.Interfaces})
	}
	for _, n := range b.net.Nodes {
		if n.Adopted {
			continue
		}
		jobs = append(jobs, job{owner: &n.Namespace, ifs: n.Spec.Interfaces})
	}
	for i := range jobs {
		for _, ifc := range jobs[i].ifs {
			name := ""
			if ifc.Switch != "" {
				port[ifc.Switch]++
				name = "p" + strconv.Itoa(port[ifc.Switch])
			}
			jobs[i].ports = append(jobs[i].ports, name)
		}
	}
	g, gctx = b.group(ctx)
	for _, j := range jobs {
		g.Go(func() error {
			return withHandle(j.owner, func(h *netlink.Handle) error {
				for i, ifc := range j.ifs {
					if err := b.makeInterface(gctx, h, j.owner, ifc, j.ports[i], owners); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// Ports are enslaved in each switch once all exist.
	g, gctx = b.group(ctx)
	for _, s := range b.net.Switches {
		g.Go(func() error { return withHandle(s, enslavePorts) })
	}
	if err := g.Wait(); err != nil {
		return err
	}

	// 4. Addresses, routes, tunnels and workloads.
	g, gctx = b.group(ctx)
	for _, rt := range b.net.Routers {
		g.Go(func() error {
			return withHandle(&rt.Namespace, func(h *netlink.Handle) error {
				return configureInterfaces(h, rt.Name, rt.Spec.Interfaces)
			})
		})
	}
	for _, n := range b.net.Nodes {
		g.Go(func() error { return b.configureNode(gctx, n) })
	}
	return g.Wait()
}

var routerSysctls = map[string]string{
	"net/ipv4/ip_forward":                  "1",
	"net/ipv6/conf/all/forwarding":         "1",
	"net/ipv4/conf/all/rp_filter":          "0",
	"net/ipv4/conf/default/rp_filter":      "0",
	"net/ipv6/conf/default/accept_dad":     "0",
	"net/ipv4/conf/all/accept_redirects":   "0",
	"net/ipv4/conf/all/send_redirects":     "0",
	"net/ipv4/conf/default/send_redirects": "0",
}

var workloadSysctls = map[string]string{
	"net/ipv6/conf/default/accept_dad": "0",
	"net/ipv6/conf/all/accept_dad":     "0",
}

func (b *builder) createNS(ctx context.Context, n *Namespace, sysctls map[string]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name := b.r.Name(n.Name)
	b.net.mu.Lock()
	if b.net.closed {
		b.net.mu.Unlock()
		return errClosed
	}
	b.net.created = append(b.net.created, name) // recorded first: a half-made namespace is still removed
	b.net.inflight.Add(1)                       // Close waits for this creation before deleting
	b.net.mu.Unlock()
	defer b.net.inflight.Done()
	h, err := nsutil.Create(name)
	if err != nil {
		return err
	}
	n.NetNS, n.Path, n.NS = name, nsutil.Path(name), h
	return nsutil.SetSysctls(h, sysctls)
}

func (b *builder) adoptNS(n *NodeNS) error {
	path := n.Spec.Adopt
	if pid, ok := strings.CutPrefix(path, "pid:"); ok {
		path = filepath.Join("/proc", pid, "ns", "net")
	}
	h, err := ns.GetNS(path)
	if err != nil {
		return b.net.Topology.errorf("node %q: field adopt: %q: %w", n.Name, n.Spec.Adopt, err)
	}
	n.Path, n.NS, n.Adopted = path, h, true
	return nil
}

func withHandle(n *Namespace, fn func(*netlink.Handle) error) error {
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	if err := fn(h); err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	return nil
}

const bridgeName = "br0"

func makeBridge(h *netlink.Handle, s *Namespace) error {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}}
	if err := h.LinkAdd(br); err != nil {
		return fmt.Errorf("add bridge: %w", err)
	}
	// No STP, no forwarding delay: ports forward as soon as they are up.
	if err := h.LinkSetUp(br); err != nil {
		return fmt.Errorf("bridge up: %w", err)
	}
	return nil
}

func enslavePorts(h *netlink.Handle) error {
	br, err := h.LinkByName(bridgeName)
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	links, err := nsutil.Links(h)
	if err != nil {
		return err
	}
	for _, l := range links {
		if _, ok := l.(*netlink.Veth); !ok {
			continue
		}
		if err := h.LinkSetMasterByIndex(l, br.Attrs().Index); err != nil {
			return fmt.Errorf("port %s: %w", l.Attrs().Name, err)
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("port %s up: %w", l.Attrs().Name, err)
		}
	}
	return nil
}

// makeInterface creates the veth for one interface: its far end is a switch
// port, or the peer interface (created once, by the side whose key sorts
// first).
func (b *builder) makeInterface(_ context.Context, h *netlink.Handle, owner *Namespace, ifc Interface, port string, owners map[string]*Namespace) error {
	var peerNS *Namespace
	var peerName string
	switch {
	case ifc.Switch != "":
		peerNS, peerName = owners[ifc.Switch], port
	case ifc.Peer != "":
		pOwner, pIf, _ := strings.Cut(ifc.Peer, ":")
		if owner.Name+":"+ifc.Name > ifc.Peer {
			return nil // the peer's side creates the pair
		}
		peerNS, peerName = owners[pOwner], pIf
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: ifc.Name},
		PeerName:      peerName,
		PeerNamespace: netlink.NsFd(int(peerNS.NS.Fd())),
	}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("interface %s (peer %s in %s): %w", ifc.Name, peerName, peerNS.Name, err)
	}
	return nil
}

// configureInterfaces sets addresses, brings interfaces up and adds the
// default route (ECMP when several interfaces have a gateway).
func configureInterfaces(h *netlink.Handle, owner string, ifs []Interface) error {
	var hops []*netlink.NexthopInfo
	for _, ifc := range ifs {
		l, err := h.LinkByName(ifc.Name)
		if err != nil {
			return fmt.Errorf("interface %s: %w", ifc.Name, err)
		}
		for _, a := range []string{ifc.Address, ifc.Address6} {
			if a == "" {
				continue
			}
			addr, err := netlink.ParseAddr(a)
			if err != nil {
				return fmt.Errorf("interface %s: address %s: %w", ifc.Name, a, err)
			}
			if err := h.AddrAdd(l, addr); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("interface %s: address %s: %w", ifc.Name, a, err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("interface %s up: %w", ifc.Name, err)
		}
		if ifc.Gateway != "" {
			hops = append(hops, &netlink.NexthopInfo{LinkIndex: l.Attrs().Index, Gw: net.ParseIP(ifc.Gateway)})
		}
	}
	switch len(hops) {
	case 0:
		return nil
	case 1:
		rt := &netlink.Route{Dst: defaultRoute4, LinkIndex: hops[0].LinkIndex, Gw: hops[0].Gw}
		if err := h.RouteReplace(rt); err != nil {
			return fmt.Errorf("default route via %s: %w", hops[0].Gw, err)
		}
	default:
		if err := h.RouteReplace(&netlink.Route{Dst: defaultRoute4, MultiPath: hops}); err != nil {
			return fmt.Errorf("ECMP default route: %w", err)
		}
	}
	return nil
}

var defaultRoute4 = &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}

func (b *builder) configureNode(ctx context.Context, n *NodeNS) error {
	err := withHandle(&n.Namespace, func(h *netlink.Handle) error {
		if !n.Adopted {
			if err := configureInterfaces(h, n.Name, n.Spec.Interfaces); err != nil {
				return err
			}
			if n.Spec.Loopback != "" {
				lo, err := h.LinkByName("lo")
				if err != nil {
					return err
				}
				addr, _ := netlink.ParseAddr(n.Spec.Loopback)
				if err := h.AddrAdd(lo, addr); err != nil {
					return fmt.Errorf("loopback %s: %w", n.Spec.Loopback, err)
				}
			}
		}
		if b.net.Topology.NeedsTunnel() {
			if err := b.setupTunnel(h, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, wl := range n.Workloads {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.plugWorkload(n, wl); err != nil {
			return fmt.Errorf("node %s: workload %s: %w", n.Name, wl.Name, err)
		}
	}
	return nil
}

// setupTunnel brings up the node's tunl0, the kernel's fallback device when
// the ipip module is loaded (as Calico uses it) or else the eBPF emulation,
// with the first address of the node's first IPIP block.
func (b *builder) setupTunnel(h *netlink.Handle, n *NodeNS) error {
	mode := b.f.TunnelMode()
	var addr netip.Addr
	for _, blk := range n.Blocks {
		if blk.Pool.IsIPIP() {
			addr = blk.CIDR.Addr()
			break
		}
	}
	if mode == TunnelKernel {
		l, err := ensureTunl0(h)
		if err != nil {
			return err
		}
		if err := h.LinkSetMTU(l, 1480); err != nil {
			return fmt.Errorf("tunl0 mtu: %w", err)
		}
		if err := upWithAddr(h, l, addr); err != nil {
			return err
		}
	} else {
		t, err := emulateTunl0(h, n, addr, mode)
		if err != nil {
			return err
		}
		b.net.mu.Lock()
		b.net.tunnels = append(b.net.tunnels, t)
		b.net.mu.Unlock()
	}
	n.Tunnel, n.TunnelMode = true, mode
	return nil
}

// ensureTunl0 returns the namespace's tunl0, creating it when the module is
// there but the fallback device is not (fb_tunnels_only_for_init_net).
func ensureTunl0(h *netlink.Handle) (netlink.Link, error) {
	if l, err := h.LinkByName(TunnelDevice); err == nil {
		return l, nil
	}
	err := h.LinkAdd(&netlink.Iptun{LinkAttrs: netlink.LinkAttrs{Name: TunnelDevice}})
	if err != nil && !errors.Is(err, unix.EEXIST) {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return nil, ErrNoIPIP
		}
		return nil, fmt.Errorf("create tunl0: %w", err)
	}
	l, err := h.LinkByName(TunnelDevice)
	if err != nil {
		return nil, fmt.Errorf("tunl0: %w", err)
	}
	return l, nil
}

// plugWorkload does what Calico's CNI plugin does: a veth whose host end is
// cali<hash> with MAC ee:ee:ee:ee:ee:ee, the workload's /32 (and /128) on
// eth0, its default route via 169.254.1.1, and a host-side /32 route.
func (b *builder) plugWorkload(n *NodeNS, wl *Workload) error {
	nh, err := n.Handle()
	if err != nil {
		return err
	}
	defer nh.Close()
	wh, err := wl.Handle()
	if err != nil {
		return err
	}
	defer wh.Close()

	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: wl.HostIface, HardwareAddr: HostVethMAC},
		PeerName:      wl.Iface,
		PeerNamespace: netlink.NsFd(int(wl.NS.Fd())),
	}
	if err := nh.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth %s: %w", wl.HostIface, err)
	}
	host, err := nh.LinkByName(wl.HostIface)
	if err != nil {
		return err
	}
	// Calico answers the workload's ARP for 169.254.1.1 with proxy ARP. A
	// permanent neighbour entry in the workload gives the same forwarding
	// without depending on the node having a route covering 169.254.1.1.
	if err := nsutil.SetSysctls(n.NS, map[string]string{"net/ipv4/conf/" + wl.HostIface + "/proxy_arp": "1"}); err != nil && !n.Adopted {
		return err
	}
	if err := nh.LinkSetUp(host); err != nil {
		return fmt.Errorf("%s up: %w", wl.HostIface, err)
	}
	inner, err := wh.LinkByName(wl.Iface)
	if err != nil {
		return err
	}
	if err := wh.LinkSetUp(inner); err != nil {
		return fmt.Errorf("%s up: %w", wl.Iface, err)
	}
	for _, a := range []netip.Addr{wl.IPv4, wl.IPv6} {
		if !a.IsValid() {
			continue
		}
		bits := a.BitLen()
		ipn := &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, bits)}
		if err := wh.AddrAdd(inner, &netlink.Addr{IPNet: ipn}); err != nil {
			return fmt.Errorf("address %s: %w", a, err)
		}
		gw := WorkloadGateway
		if a.Is6() {
			gw = WorkloadGateway6
		}
		gwNet := &net.IPNet{IP: gw.AsSlice(), Mask: net.CIDRMask(bits, bits)}
		if err := wh.NeighAdd(&netlink.Neigh{LinkIndex: inner.Attrs().Index, State: netlink.NUD_PERMANENT, IP: gw.AsSlice(), HardwareAddr: HostVethMAC, Family: family(a)}); err != nil {
			return fmt.Errorf("neighbour %s: %w", gw, err)
		}
		if a.Is4() {
			if err := wh.RouteAdd(&netlink.Route{LinkIndex: inner.Attrs().Index, Dst: gwNet, Scope: netlink.SCOPE_LINK}); err != nil {
				return fmt.Errorf("route to %s: %w", gw, err)
			}
		}
		zero := &net.IPNet{IP: make(net.IP, bits/8), Mask: net.CIDRMask(0, bits)}
		if err := wh.RouteAdd(&netlink.Route{LinkIndex: inner.Attrs().Index, Dst: zero, Gw: gw.AsSlice()}); err != nil {
			return fmt.Errorf("default route via %s: %w", gw, err)
		}
		if err := nh.RouteReplace(&netlink.Route{LinkIndex: host.Attrs().Index, Dst: ipn, Scope: netlink.SCOPE_LINK}); err != nil {
			return fmt.Errorf("host route to %s: %w", a, err)
		}
	}
	return nil
}

func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// hostIfaceName is "cali" + 11 hex digits of a hash of node and index,
// stable across runs like Calico's names.
func hostIfaceName(node string, i int) string {
	sum := sha1.Sum([]byte(node + "/" + strconv.Itoa(i)))
	return "cali" + hex.EncodeToString(sum[:])[:11]
}

// workloadAddrs gives workload i the (i+1)th address of the node's first
// IPv4 and first IPv6 block; the first address is the tunnel's.
func workloadAddrs(blocks []Block, i int) (v4, v6 netip.Addr) {
	for _, b := range blocks {
		a := addOffset(b.CIDR.Addr(), uint64(i+1))
		if b.CIDR.Addr().Is4() && !v4.IsValid() {
			v4 = a
		}
		if b.CIDR.Addr().Is6() && !v6.IsValid() {
			v6 = a
		}
	}
	return v4, v6
}

func nodeAddress(n Node) netip.Prefix {
	if n.Loopback != "" {
		p, _ := netip.ParsePrefix(n.Loopback)
		return p
	}
	if len(n.Interfaces) > 0 && n.Interfaces[0].Address != "" {
		p, _ := netip.ParsePrefix(n.Interfaces[0].Address)
		return p
	}
	return netip.Prefix{}
}

// Close removes every namespace the build created, in parallel; processes
// still inside must already be stopped (the harness stops them first).
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	n.inflight.Wait()
	n.mu.Lock()
	names := n.created
	n.mu.Unlock()
	// An adopted node must be left as found, now, not whenever the kernel
	// gets round to destroying the workloads' namespaces (it is deferred
	// work): delete the workloads' host veths there first.
	var errs []error
	for _, t := range n.tunnels {
		errs = append(errs, t.Close())
	}
	for _, nd := range n.Nodes {
		if nd.Adopted && nd.NS != nil {
			errs = append(errs, unplugWorkloads(nd))
			if nd.TunnelMode != "" && nd.TunnelMode != TunnelKernel {
				errs = append(errs, removeEmulatedTunl0(nd))
			}
		}
	}
	for _, x := range n.allNamespaces() {
		if x.NS != nil {
			x.NS.Close()
		}
	}
	var g errgroup.Group
	g.SetLimit(runtime.NumCPU() * 4)
	var mu sync.Mutex
	for _, name := range names {
		g.Go(func() error {
			if err := nsutil.Delete(name); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

func unplugWorkloads(nd *NodeNS) error {
	h, err := nd.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	var errs []error
	for _, wl := range nd.Workloads {
		l, err := h.LinkByName(wl.HostIface)
		if err != nil {
			continue // never plugged, or already gone
		}
		if err := h.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("adopted node %s: remove %s: %w", nd.Name, wl.HostIface, err))
		}
	}
	return errors.Join(errs...)
}

func (n *Network) allNamespaces() []*Namespace {
	var out []*Namespace
	out = append(out, n.Switches...)
	for _, r := range n.Routers {
		out = append(out, &r.Namespace)
	}
	for _, nd := range n.Nodes {
		out = append(out, &nd.Namespace)
		for _, wl := range nd.Workloads {
			out = append(out, &wl.Namespace)
		}
	}
	return out
}

// Node returns the named node.
func (n *Network) Node(name string) (*NodeNS, bool) {
	for _, x := range n.Nodes {
		if x.Name == name {
			return x, true
		}
	}
	return nil, false
}

// Router returns the named router.
func (n *Network) Router(name string) (*RouterNS, bool) {
	for _, x := range n.Routers {
		if x.Name == name {
			return x, true
		}
	}
	return nil, false
}

// Namespace finds any namespace (switch, router, node or workload) by its
// topology name.
func (n *Network) Namespace(name string) (*Namespace, bool) {
	for _, x := range n.allNamespaces() {
		if x.Name == name {
			return x, true
		}
	}
	return nil, false
}

// Workloads lists every workload, node by node.
func (n *Network) Workloads() []*Workload {
	var out []*Workload
	for _, nd := range n.Nodes {
		out = append(out, nd.Workloads...)
	}
	return out
}

// DetectFeatures asks the kernel what it can do, in a scratch namespace of
// the run (never the host's). Where ipip is a module that is not loaded yet,
// creating the device loads it, which also gives the root namespace its
// fallback tunl0 (down, unconfigured): the kernel does that, not birdcage,
// and there is no way to have IPIP without it.
func DetectFeatures(r *run.Run) (Features, error) {
	featuresMu.Lock()
	defer featuresMu.Unlock()
	if featuresDone {
		return detected, featuresErr
	}
	name := r.Name("features")
	// Registered before the namespace exists, and waiting for the
	// detection to end: a run closed by a signal while this runs must not
	// exit between the namespace's creation and its deletion. A run already
	// closing makes nothing (and the answer stays unknown for the next).
	detecting := make(chan struct{})
	defer close(detecting)
	if err := r.Guard("netns "+name, func() error { <-detecting; return nsutil.Delete(name) }); err != nil {
		return Features{}, err
	}
	featuresDone = true
	h, err := nsutil.Create(name)
	if err != nil {
		featuresErr = err
		return detected, err
	}
	defer func() { h.Close(); _ = nsutil.Delete(name) }()
	nh, err := nsutil.Handle(h)
	if err != nil {
		featuresErr = err
		return detected, err
	}
	defer nh.Close()
	_, kerr := ensureTunl0(nh)
	var eerr error
	if kerr != nil || forcedTunnel != "" && forcedTunnel != TunnelKernel {
		eerr = proveEmulation(nh, &Namespace{Name: "features", NetNS: name, Path: nsutil.Path(name), NS: h})
	}
	var line string
	detected, line = chooseTunnel(forcedTunnel, kerr == nil, eerr)
	detected.KernelIPIP = kerr == nil
	sayTunnel(line)
	return detected, nil
}

// What the kernel can do does not change while the process lives: detected
// once.
var (
	featuresMu   sync.Mutex
	featuresDone bool
	detected     Features
	featuresErr  error
)
