package topo

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/nsutil"
)

// forcedTunnel is the process's forced choice of how tunl0 is made
// (ForceTunnel); "" chooses by proof.
var forcedTunnel string

// ForceTunnel forces how this process makes tunl0: TunnelKernel or
// TunnelEBPF (TunnelEBPFNoEncap is the emulation's negative control); ""
// leaves the choice to proof: the kernel's where it has ipip, else the
// emulation. A process's edge calls it with $BIRDCAGE_TUNNEL
// (internal/env) before anything is built; the choice is made once, at the
// first detection.
func ForceTunnel(mode string) {
	featuresMu.Lock()
	defer featuresMu.Unlock()
	forcedTunnel = mode
}

// How tunl0 is made (Features.Tunnel, Network.Tunnel, the results' run
// environment).
const (
	// TunnelKernel is the ipip module's fallback device, as Calico uses it.
	TunnelKernel = "kernel"
	// TunnelEBPF is a NOARP veth named tunl0 with bpf/tunnel.c attached:
	// IPIP emulated where the kernel has no ipip (DESIGN.md, "Tunnels where
	// the kernel has none").
	TunnelEBPF = "ebpf"
	// TunnelEBPFNoEncap is TunnelEBPF with encapsulation disabled: packets
	// routed via tunl0 leave toward the same next hop as they are. Only for
	// showing that the checks of the emulation can fail.
	TunnelEBPFNoEncap = "ebpf-noencap"
)

// tunnelPeer is the other end of an emulated tunl0's veth, in the node's
// namespace: what tunl0 sends arrives there, where the encapsulation
// program (at its ingress) sends it on or drops it; the stack never sees
// it (it has no address and no IPv6).
const tunnelPeer = "tunl0-peer"

// chooseTunnel picks how tunl0 is made from the forced choice ("" for
// none: ForceTunnel) and what was
// proved: kernel (an ipip link could be made) and ebpfErr (the emulation
// could not be attached, or nil). It returns the choice and the one line
// that says it.
func chooseTunnel(forced string, kernel bool, ebpfErr error) (Features, string) {
	switch forced {
	case TunnelKernel:
		if !kernel {
			err := fmt.Errorf("%s=%s, but the kernel has no ipip (no ipip link could be made in a namespace); unset it or use %s", env.Tunnel, TunnelKernel, TunnelEBPF)
			return Features{TunnelErr: err}, "tunl0: none (" + err.Error() + ")"
		}
		return Features{IPIP: true, Tunnel: TunnelKernel}, fmt.Sprintf("tunl0: the kernel's ipip (forced by %s)", env.Tunnel)
	case TunnelEBPF, TunnelEBPFNoEncap:
		if ebpfErr != nil {
			err := fmt.Errorf("%s=%s, but the eBPF tunnel cannot run here: %w", env.Tunnel, forced, ebpfErr)
			return Features{TunnelErr: err}, "tunl0: none (" + err.Error() + ")"
		}
		line := fmt.Sprintf("tunl0: the eBPF emulation (forced by %s)", env.Tunnel)
		if forced == TunnelEBPFNoEncap {
			line = fmt.Sprintf("tunl0: the eBPF emulation WITHOUT encapsulation (%s=%s, a negative control)", env.Tunnel, forced)
		}
		return Features{IPIP: true, Tunnel: forced}, line
	case "":
	default:
		err := fmt.Errorf("%s=%q is not one of %s, %s, %s", env.Tunnel, forced, TunnelKernel, TunnelEBPF, TunnelEBPFNoEncap)
		return Features{TunnelErr: err}, "tunl0: none (" + err.Error() + ")"
	}
	if kernel {
		return Features{IPIP: true, Tunnel: TunnelKernel}, "tunl0: the kernel's ipip"
	}
	if ebpfErr != nil {
		return Features{}, fmt.Sprintf("tunl0: none (the kernel has no ipip and the eBPF emulation cannot run here: %v)", ebpfErr)
	}
	return Features{IPIP: true, Tunnel: TunnelEBPF}, fmt.Sprintf("tunl0: the eBPF emulation (the kernel has no ipip; %s=kernel|ebpf forces)", env.Tunnel)
}

// ChosenTunnel is how this process makes tunl0 ("" until a build detected
// it, or where no tunl0 can be made).
func ChosenTunnel() string {
	featuresMu.Lock()
	defer featuresMu.Unlock()
	if !featuresDone || !detected.IPIP {
		return ""
	}
	return detected.TunnelMode()
}

// TunnelMode is how tunl0 is made under f: f.Tunnel, "" meaning
// TunnelKernel.
func (f Features) TunnelMode() string {
	if f.Tunnel == "" {
		return TunnelKernel
	}
	return f.Tunnel
}

// makeEmulatedTunl0 makes the emulated tunl0 in h's namespace: a veth pair
// (tunl0, tunnelPeer), both NOARP, up, without IPv6 (the kernel's tunl0 has
// no link-local address either), MTU mtu. A kernel fallback tunl0 in the way
// (BIRDCAGE_TUNNEL=ebpf on a kernel with ipip) is renamed tunl0-fb and left
// down; the emulation's decapsulation runs before the stack would hand it a
// packet.
func makeEmulatedTunl0(h *netlink.Handle, n *Namespace, mtu int) (netlink.Link, error) {
	if l, err := h.LinkByName(TunnelDevice); err == nil {
		if _, ok := l.(*netlink.Iptun); !ok {
			return nil, fmt.Errorf("emulated tunl0: a %s device named tunl0 is already there", l.Type())
		}
		if err := h.LinkSetDown(l); err != nil {
			return nil, fmt.Errorf("emulated tunl0: the kernel's tunl0 down: %w", err)
		}
		if err := h.LinkSetName(l, "tunl0-fb"); err != nil {
			return nil, fmt.Errorf("emulated tunl0: rename the kernel's tunl0 out of the way: %w", err)
		}
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: TunnelDevice, MTU: mtu}, PeerName: tunnelPeer}
	if err := h.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("emulated tunl0: add veth: %w", err)
	}
	sysctls := map[string]string{}
	for _, name := range []string{TunnelDevice, tunnelPeer} {
		sysctls["net/ipv6/conf/"+name+"/disable_ipv6"] = "1"
	}
	if err := nsutil.SetSysctls(n.NS, sysctls); err != nil {
		return nil, fmt.Errorf("emulated tunl0: %w", err)
	}
	for _, name := range []string{tunnelPeer, TunnelDevice} {
		l, err := h.LinkByName(name)
		if err != nil {
			return nil, fmt.Errorf("emulated tunl0: %w", err)
		}
		if err := h.LinkSetARPOff(l); err != nil {
			return nil, fmt.Errorf("emulated tunl0: %s arp off: %w", name, err)
		}
		if name == tunnelPeer {
			if err := h.LinkSetUp(l); err != nil {
				return nil, fmt.Errorf("emulated tunl0: %s up: %w", name, err)
			}
		}
	}
	return h.LinkByName(TunnelDevice)
}

// EmulateTunl0 gives a namespace birdcage did not build (a hand-made lab's
// node, made by the lab's own commands) the tunl0 a built node gets where
// the kernel has no ipip (emulateTunl0), with addr as its /32. mode is
// TunnelEBPF or TunnelEBPFNoEncap. The caller closes the programs when the
// lab goes; the devices go with the namespace.
func EmulateTunl0(nsPath string, addr netip.Addr, mode string) (*bpf.Tunnel, error) {
	if mode != TunnelEBPF && mode != TunnelEBPFNoEncap {
		return nil, fmt.Errorf("emulated tunl0: mode %q: want %s or %s", mode, TunnelEBPF, TunnelEBPFNoEncap)
	}
	netns, err := ns.GetNS(nsPath)
	if err != nil {
		return nil, fmt.Errorf("emulated tunl0: %w", err)
	}
	defer netns.Close()
	n := &NodeNS{Namespace: Namespace{Name: nsPath, Path: nsPath, NS: netns, Adopted: true}}
	var t *bpf.Tunnel
	err = withHandle(&n.Namespace, func(h *netlink.Handle) error {
		t, err = emulateTunl0(h, n, addr, mode)
		return err
	})
	return t, err
}

// emulateTunl0 makes n's emulated tunl0 with the IPIP MTU (its underlays'
// less the outer header), addr (when valid) as its /32, up, and attaches
// the programs: clsact, not TCX, so the filters live as long as the
// devices (a topology left up, birdcage up --keep, keeps its tunnels after
// this process exits) and run after every TCX program (the counters) on
// the hook.
func emulateTunl0(h *netlink.Handle, n *NodeNS, addr netip.Addr, mode string) (*bpf.Tunnel, error) {
	names, mtu, err := underlays(h, n)
	if err != nil {
		return nil, fmt.Errorf("emulated tunl0: %w", err)
	}
	l, err := makeEmulatedTunl0(h, &n.Namespace, mtu-20)
	if err != nil {
		return nil, err
	}
	if err := upWithAddr(h, l, addr); err != nil {
		return nil, err
	}
	return bpf.AttachTunnel(bpf.TunnelOptions{Netns: n.Path, Device: TunnelDevice, Peer: tunnelPeer, Underlays: names,
		NoEncap: mode == TunnelEBPFNoEncap, Legacy: true})
}

// upWithAddr gives tunl0 addr as its /32 (when valid) and sets it up.
func upWithAddr(h *netlink.Handle, l netlink.Link, addr netip.Addr) error {
	if addr.IsValid() {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(32, 32)}}
		if err := h.AddrAdd(l, a); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("tunl0 address %s: %w", a.IPNet, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("tunl0 up: %w", err)
	}
	return nil
}

// underlays are the node's devices that packets to it arrive on: its
// interfaces, or for an adopted node without any listed, every up device
// with an IPv4 address but lo, tunl0 and workload veths.
func underlays(h *netlink.Handle, n *NodeNS) ([]string, int, error) {
	var names []string
	for _, ifc := range n.Spec.Interfaces {
		names = append(names, ifc.Name)
	}
	if len(names) == 0 {
		links, err := nsutil.Links(h)
		if err != nil {
			return nil, 0, err
		}
		for _, l := range links {
			a := l.Attrs()
			if a.Name == "lo" || a.Name == TunnelDevice || a.Name == tunnelPeer || strings.HasPrefix(a.Name, "cali") || a.Flags&net.FlagUp == 0 {
				continue
			}
			if addrs, err := nsutil.Addrs(h, l, netlink.FAMILY_V4); err == nil && len(addrs) > 0 {
				names = append(names, a.Name)
			}
		}
	}
	mtu := 0
	for _, name := range names {
		l, err := h.LinkByName(name)
		if err != nil {
			return nil, 0, fmt.Errorf("underlay %s: %w", name, err)
		}
		if m := l.Attrs().MTU; mtu == 0 || m < mtu {
			mtu = m
		}
	}
	if len(names) == 0 {
		return nil, 0, errors.New("no underlay device to decapsulate on")
	}
	return names, mtu, nil
}

// proveEmulation proves the helper flags the programs pass
// (bpf.TunnelHelpersWork), then makes an emulated tunl0 in the scratch
// namespace and attaches the programs to it, so the choice rests on what
// this kernel accepted and can run.
func proveEmulation(h *netlink.Handle, n *Namespace) error {
	// The programs attach on a kernel whose helpers refuse their flags,
	// and then deliver nothing: prove the helpers first.
	if err := bpf.TunnelHelpersWork(); err != nil {
		return err
	}
	l, err := makeEmulatedTunl0(h, n, 1480)
	if err != nil {
		return err
	}
	t, err := bpf.AttachTunnel(bpf.TunnelOptions{Netns: n.Path, Device: l.Attrs().Name, Peer: tunnelPeer, Underlays: []string{TunnelDevice}, Legacy: true})
	if err != nil {
		return err
	}
	return t.Close()
}

// removeEmulatedTunl0 deletes an adopted node's emulated tunl0 (both ends
// go with it).
func removeEmulatedTunl0(nd *NodeNS) error {
	h, err := nd.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(TunnelDevice)
	if err != nil {
		return nil
	}
	if _, ok := l.(*netlink.Veth); !ok {
		return nil
	}
	if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("adopted node %s: remove the emulated tunl0: %w", nd.Name, err)
	}
	return nil
}

// sayTunnel prints the choice once per process, like the VM runner's
// accelerator line.
func sayTunnel(line string) { fmt.Fprintln(os.Stderr, "birdcage: "+line) }
