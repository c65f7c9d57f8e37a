package control

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/instrument/timeline"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
)

// ownerName names a route protocol as the owner of a prefix.
func (s *Server) ownerName(proto kroute.Protocol) string {
	if proto == kroute.ProtoUnspec {
		return "none"
	}
	switch kroute.OwnerOf(proto, s.c.ProgrammerProtocol(context.Background())) {
	case kroute.OwnerProgrammer:
		return fmt.Sprintf("programmer (proto %s)", proto)
	case kroute.OwnerBIRD:
		return "BIRD (proto bird)"
	}
	switch proto {
	case kroute.ProtoKernel, kroute.ProtoBoot, kroute.ProtoStatic:
		return fmt.Sprintf("%s (proto %s)", proto, proto)
	}
	return fmt.Sprintf("proto %s", proto)
}

// pools are the cluster's IP pools, the prefixes cluster routes are in.
func (s *Server) pools() []netip.Prefix {
	var ps []netip.Prefix
	for _, p := range s.c.Net.Topology.Pools {
		if pp, err := netip.ParsePrefix(p.CIDR); err == nil {
			ps = append(ps, pp)
		}
	}
	return ps
}

func inside(outer, p netip.Prefix) bool {
	return outer.Bits() <= p.Bits() && outer.Contains(p.Addr())
}

func parsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("prefix %q: want a CIDR such as 10.65.1.0/26 or an address", s)
}

// timeline prints a node's route events (from the cluster's timeline
// monitor, running since Start) with the harness's events between them,
// the owner of each prefix as it changes, and per prefix the owner sequence
// (timeline.Monitor.Flaps, the query the scenarios use).
func (s *Server) timeline(req Request, o *out) error {
	n, err := s.node(req.Node)
	if err != nil {
		return err
	}
	m := s.c.Timeline(n.Name)
	if m == nil {
		return fmt.Errorf("node %s has no route timeline", n.Name)
	}
	var filter func(netip.Prefix) bool
	what := "routes inside the cluster's pools"
	switch {
	case req.Prefix != "":
		p, err := parsePrefix(req.Prefix)
		if err != nil {
			return err
		}
		filter = func(d netip.Prefix) bool { return inside(p, d) }
		what = "routes inside " + p.String()
	case req.All:
		filter = func(netip.Prefix) bool { return true }
		what = "every route"
	default:
		pools := s.pools()
		filter = func(d netip.Prefix) bool {
			for _, p := range pools {
				if inside(p, d) {
					return true
				}
			}
			return false
		}
	}
	present := map[netip.Prefix]map[int]kroute.Route{}
	owner := map[netip.Prefix]kroute.Protocol{}
	ownerOf := func(d netip.Prefix) kroute.Protocol {
		best, proto := -1, kroute.ProtoUnspec
		for metric, r := range present[d] {
			if r.Forwards() && (best < 0 || metric < best) {
				best, proto = metric, r.Protocol
			}
		}
		return proto
	}
	var evs []timed
	prefixes := map[netip.Prefix]bool{}
	for _, e := range m.Events() {
		r := e.Route
		if r.Table != kroute.MainTable || !filter(r.Dst) {
			continue
		}
		prefixes[r.Dst] = true
		if present[r.Dst] == nil {
			present[r.Dst] = map[int]kroute.Route{}
		}
		if e.Kind == event.Delete {
			delete(present[r.Dst], r.Metric)
		} else {
			present[r.Dst][r.Metric] = r
		}
		kind := string(e.Kind)
		switch {
		case e.Existing:
			kind = "present"
		case e.Resync:
			kind += " (seen by re-read)"
		}
		text := fmt.Sprintf("%-8s %s", kind, r)
		if now := ownerOf(r.Dst); now != owner[r.Dst] || e.Existing {
			if !e.Existing || now != 0 {
				text += "   owner → " + s.ownerName(now)
			}
			owner[r.Dst] = now
		}
		evs = append(evs, timed{e.At, text})
	}
	for _, e := range s.c.Events() {
		evs = append(evs, timed{e.Mono, "── " + e.Name})
	}
	o.text("%s: route timeline since the cluster started (%s; owner = the protocol of the lowest-metric route)", n.Name, what)
	emitSorted(o, evs)
	ps := make([]netip.Prefix, 0, len(prefixes))
	for p := range prefixes {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].String() < ps[j].String() })
	if len(ps) == 0 {
		o.text("no route events for %s", what)
		return nil
	}
	o.text("\nowner per prefix (start → now):")
	now := monoclock.Now()
	type flapsOut struct {
		timeline.Flaps
		OwnerNames []string `json:"ownerNames"`
	}
	var data []flapsOut
	for _, p := range ps {
		f := m.Flaps(p, m.StartedAt(), now)
		var names []string
		for _, ow := range f.Owners {
			names = append(names, s.ownerName(ow))
		}
		data = append(data, flapsOut{f, names})
		o.text("  %-22s %s   (%d adds, %d replaces, %d deletes, %d owner changes)", p, strings.Join(names, " → "), f.Adds, f.Replaces, f.Deletes, f.OwnerChanges)
	}
	b, _ := json.Marshal(data)
	o.line(Line{Kind: KindReport, Data: b})
	return nil
}

func (s *Server) birdOf(name string) (*bird.Instance, error) {
	var names []string
	for _, n := range s.c.Nodes() {
		if n.Name == name {
			return n.BIRD, nil
		}
		names = append(names, n.Name)
	}
	for _, r := range s.c.Fabric().Routers() {
		if r.Name == name {
			return r.BIRD, nil
		}
		names = append(names, r.Name)
	}
	return nil, fmt.Errorf("run %s has no node or router %q running BIRD; it has %s", s.c.Run.ID, name, strings.Join(names, ", "))
}

func (s *Server) birdc(ctx context.Context, req Request, o *out) error {
	if len(req.Command) > 0 {
		for _, n := range s.c.Nodes() {
			if n.Name == req.Node && n.Calico != nil {
				// Calico's BIRD, on its socket in the pod's /var/run/calico.
				reply, err := n.Calico.BIRD().Run(ctx, strings.Join(req.Command, " "))
				if t := strings.TrimRight(reply.Text(), "\n"); t != "" {
					o.text("%s", t)
				}
				return err
			}
		}
	}
	b, err := s.birdOf(req.Node)
	if err != nil {
		return err
	}
	if len(req.Command) == 0 {
		return fmt.Errorf("birdc %s: give a command after --, e.g. birdcage birdc %s -- show protocols", req.Node, req.Node)
	}
	if !b.Running() {
		return fmt.Errorf("BIRD on %s is not running (birdcage bird %s start)", req.Node, req.Node)
	}
	reply, err := b.Client().Run(ctx, strings.Join(req.Command, " "))
	if t := strings.TrimRight(reply.Text(), "\n"); t != "" {
		o.text("%s", t)
	}
	return err
}

// routes prints a node's main-table routes grouped by owner (protocol),
// the programmer's and BIRD's first.
func (s *Server) routes(req Request, o *out) error {
	n, err := s.node(req.Node)
	if err != nil {
		return err
	}
	rs, err := n.Routes(netip.Prefix{})
	if err != nil {
		return err
	}
	groups := map[kroute.Protocol][]kroute.Route{}
	for _, r := range rs {
		groups[r.Protocol] = append(groups[r.Protocol], r)
	}
	protos := make([]kroute.Protocol, 0, len(groups))
	for p := range groups {
		protos = append(protos, p)
	}
	rank := func(p kroute.Protocol) int {
		switch s.ownerName(p) {
		case s.ownerName(kroute.ProtoBIRD):
			return 1
		}
		if strings.HasPrefix(s.ownerName(p), "programmer") {
			return 0
		}
		return 2
	}
	sort.Slice(protos, func(i, j int) bool {
		if rank(protos[i]) != rank(protos[j]) {
			return rank(protos[i]) < rank(protos[j])
		}
		return protos[i] < protos[j]
	})
	pools := s.pools()
	o.text("%s (%s, %s): %d main-table routes by owner; * = inside a cluster pool", n.Name, n.Release(), n.Flavour(), len(rs))
	data := map[string][]kroute.Route{}
	for _, p := range protos {
		name := s.ownerName(p)
		if n.Calico != nil && p == kroute.ProtoCalicoDefault {
			name = fmt.Sprintf("Felix (proto %s)", p)
		}
		data[name] = groups[p]
		o.text("%s: %d", name, len(groups[p]))
		for _, r := range groups[p] {
			mark := " "
			for _, pool := range pools {
				if inside(pool, r.Dst) {
					mark = "*"
				}
			}
			o.text("  %s %s", mark, r)
		}
	}
	b, _ := json.Marshal(data)
	o.line(Line{Kind: KindReport, Data: b})
	return nil
}
