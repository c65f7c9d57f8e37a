package lab

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/internal/nsutil"
)

// Snapshot is what a namespace holds that attaching could change: its
// links, addresses, routes (every table, both families), qdiscs, tc
// filters and TCX programs, each as one canonical line per item so two
// snapshots compare line by line. Neighbour entries are not in it: probe
// traffic learns them, as any traffic would, and the kernel ages them.
type Snapshot struct {
	Netns string
	Parts map[string][]string // "links", "addrs", "routes", "qdiscs", "filters", "tcx"
}

// SnapshotParts are the parts of a Snapshot, in report order.
var SnapshotParts = []string{"links", "addrs", "routes", "qdiscs", "filters", "tcx"}

// TakeSnapshot reads a namespace's state.
func TakeSnapshot(path string) (Snapshot, error) {
	s := Snapshot{Netns: path, Parts: map[string][]string{}}
	n, err := ns.GetNS(path)
	if err != nil {
		return s, fmt.Errorf("snapshot %s: %w", path, err)
	}
	defer n.Close()
	h, err := nsutil.Handle(n)
	if err != nil {
		return s, err
	}
	defer h.Close()
	links, err := nsutil.Links(h)
	if err != nil {
		return s, fmt.Errorf("snapshot %s: links: %w", path, err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	for _, l := range links {
		a := l.Attrs()
		up := "down"
		if a.Flags&unix.IFF_UP != 0 {
			up = "up"
		}
		s.add("links", fmt.Sprintf("%s type %s %s mtu %d master %q mac %s", a.Name, l.Type(), up, a.MTU, names[a.MasterIndex], a.HardwareAddr))
		addrs, err := nsutil.Addrs(h, l, netlink.FAMILY_ALL)
		if err != nil {
			return s, fmt.Errorf("snapshot %s: addresses of %s: %w", path, a.Name, err)
		}
		for _, ad := range addrs {
			s.add("addrs", a.Name+" "+ad.IPNet.String())
		}
		qds, err := h.QdiscList(l)
		if err != nil {
			return s, fmt.Errorf("snapshot %s: qdiscs of %s: %w", path, a.Name, err)
		}
		for _, q := range qds {
			s.add("qdiscs", fmt.Sprintf("%s %s handle %s parent %s", a.Name, q.Type(), netlink.HandleStr(q.Attrs().Handle), netlink.HandleStr(q.Attrs().Parent)))
		}
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, err := h.FilterList(l, parent)
			if err != nil {
				continue // no clsact qdisc: no filters there
			}
			for _, f := range fs {
				s.add("filters", fmt.Sprintf("%s parent %s %s prio %d", a.Name, netlink.HandleStr(parent), f.Type(), f.Attrs().Priority))
			}
		}
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := nsutil.Routes(h, fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return s, fmt.Errorf("snapshot %s: routes: %w", path, err)
		}
		for _, r := range rs {
			s.add("routes", routeLine(r, names))
		}
	}
	// TCX programs are not netlink objects: ask the kernel per interface,
	// from a thread inside the namespace (ifindexes resolve there).
	err = n.Do(func(ns.NetNS) error {
		for _, l := range links {
			for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
				res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: at})
				if err != nil {
					continue // no TCX on this kernel or this device
				}
				for _, p := range res.Programs {
					s.add("tcx", fmt.Sprintf("%s %s program %d", l.Attrs().Name, at, p.ID))
				}
			}
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	for _, k := range SnapshotParts {
		sort.Strings(s.Parts[k])
	}
	return s, nil
}

func (s *Snapshot) add(part, line string) { s.Parts[part] = append(s.Parts[part], line) }

func routeLine(r netlink.Route, names map[int]string) string {
	var b strings.Builder
	dst := "default"
	if r.Dst != nil {
		dst = r.Dst.String()
	}
	fmt.Fprintf(&b, "table %d type %d %s proto %d metric %d scope %d", r.Table, r.Type, dst, r.Protocol, r.Priority, r.Scope)
	if r.Gw != nil {
		fmt.Fprintf(&b, " via %s", r.Gw)
	}
	if r.LinkIndex != 0 {
		fmt.Fprintf(&b, " dev %s", names[r.LinkIndex])
	}
	if r.Src != nil {
		fmt.Fprintf(&b, " src %s", r.Src)
	}
	for _, nh := range r.MultiPath {
		fmt.Fprintf(&b, " nexthop via %s dev %s", nh.Gw, names[nh.LinkIndex])
	}
	if r.Flags != 0 {
		fmt.Fprintf(&b, " flags %#x", r.Flags)
	}
	return b.String()
}

// Diff is what changed between two snapshots of one namespace: per part,
// the lines only before (gone) and only after (added).
type Diff struct {
	Netns string
	Gone  map[string][]string
	Added map[string][]string
}

// Empty reports whether nothing changed in the given parts (all parts when
// none are named).
func (d Diff) Empty(parts ...string) bool {
	if len(parts) == 0 {
		parts = SnapshotParts
	}
	for _, p := range parts {
		if len(d.Gone[p])+len(d.Added[p]) > 0 {
			return false
		}
	}
	return true
}

// String lists the changes, one per line, for people.
func (d Diff) String() string {
	var b strings.Builder
	for _, p := range SnapshotParts {
		for _, l := range d.Gone[p] {
			fmt.Fprintf(&b, "%s: %s: gone: %s\n", d.Netns, p, l)
		}
		for _, l := range d.Added[p] {
			fmt.Fprintf(&b, "%s: %s: added: %s\n", d.Netns, p, l)
		}
	}
	return b.String()
}

// Compare is after minus before.
func Compare(before, after Snapshot) Diff {
	d := Diff{Netns: before.Netns, Gone: map[string][]string{}, Added: map[string][]string{}}
	for _, p := range SnapshotParts {
		b, a := before.Parts[p], after.Parts[p]
		for _, l := range b {
			if !slices.Contains(a, l) {
				d.Gone[p] = append(d.Gone[p], l)
			}
		}
		for _, l := range a {
			if !slices.Contains(b, l) {
				d.Added[p] = append(d.Added[p], l)
			}
		}
	}
	return d
}
