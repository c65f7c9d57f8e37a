// The dual-ToR claim: BIRD-programmed no-encap routes inherit their
// "dual-ness" from BGP. Two nodes, each with one link to each of two ToRs
// that run BIRD (rendered by confd.RenderRouter, eBGP to the nodes), must
// get one multipath route per remote block with one nexthop per ToR; with
// one ToR gone the route falls back to the other.
package bird_test

import (
	"context"
	"fmt"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/vishvananda/netlink"
)

// nexthops describes a route's paths as "gw@dev" strings, sorted.
func nexthops(l *lab, n string, r netlink.Route) []string {
	var out []string
	if len(r.MultiPath) == 0 && r.Gw != nil {
		out = append(out, fmt.Sprintf("%s@%s", r.Gw, l.ifName(n, r.LinkIndex)))
	}
	for _, p := range r.MultiPath {
		out = append(out, fmt.Sprintf("%s@%s", p.Gw, l.ifName(n, p.LinkIndex)))
	}
	sort.Strings(out)
	return out
}

func TestDualToRMultipath(t *testing.T) {
	requireRoot(t)
	l := newLab(t)
	off := false
	c := &datastore.Cluster{
		Pools: []datastore.IPPool{{Name: "noencap", CIDR: "10.244.0.0/16", IPIPMode: datastore.EncapNever, VXLANMode: datastore.EncapNever}},
		BGP:   datastore.BGPConfiguration{NodeToNodeMeshEnabled: &off},
	}
	tors := []struct {
		name, plane string
		as          int
	}{{"ta", "a", 65101}, {"tb", "b", 65102}}
	routers := map[string]*confd.Router{}
	for i, tor := range tors {
		routers[tor.name] = &confd.Router{Name: tor.name, RouterID: fmt.Sprintf("10.0.20.%d", i+1), AS: tor.as}
		l.forwarding(tor.name)
	}

	// 1. Wire: node i's eth0 to ToR a on 172.31.1i.0/24, eth1 to ToR b on
	// 172.31.2i.0/24; ToR .1, node .2. Each node has its own AS.
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("n%d", i)
		nd := datastore.Node{Name: name, IPv4Address: fmt.Sprintf("10.0.10.%d/32", i), ASNumber: 65000 + i}
		l.addr(name, "lo", nd.IPv4Address)
		l.addr(name, "lo", fmt.Sprintf("10.244.%d.1/32", i))
		for p, tor := range tors {
			nodeIf := fmt.Sprintf("eth%d", p)
			subnet := fmt.Sprintf("172.31.%d%d", p+1, i)
			l.link(tor.name, name, false, name, nodeIf)
			l.addr(tor.name, name, subnet+".1/24")
			l.addr(name, nodeIf, subnet+".2/24")
			nd.Uplinks = append(nd.Uplinks, datastore.Uplink{Interface: nodeIf, Address: subnet + ".2/24", Gateway: subnet + ".1"})
			c.Peers = append(c.Peers, datastore.BGPPeer{Name: name + "-" + tor.name, Node: name, PeerIP: subnet + ".1", ASNumber: tor.as, Plane: tor.plane})
			rt := routers[tor.name]
			rt.Neighbors = append(rt.Neighbors, confd.Neighbor{Name: name, Address: subnet + ".2", AS: nd.ASNumber, Source: subnet + ".1"})
		}
		c.Nodes = append(c.Nodes, nd)
		c.Blocks = append(c.Blocks, datastore.BlockAffinity{CIDR: fmt.Sprintf("10.244.%d.0/26", i), Node: name})
	}

	// 2. Render and prepare BIRD for nodes and ToRs.
	var insts []*bird.Instance
	byName := map[string]*bird.Instance{}
	prep := func(name string, conf []byte) {
		b, err := bird.New(l.r, bird.Options{Name: name, NetNS: l.nsName(name)})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.WriteConfig(conf); err != nil {
			t.Fatal(err)
		}
		insts = append(insts, b)
		byName[name] = b
	}
	for _, nd := range c.Nodes {
		ren, err := confd.Render(c, nd.Name, config.R333, confd.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ren.Peers) != 2 {
			t.Fatalf("guard: %s renders %d sessions, want one per ToR", nd.Name, len(ren.Peers))
		}
		prep(nd.Name, ren.Config)
	}
	for _, tor := range tors {
		conf, err := confd.RenderRouter(*routers[tor.name])
		if err != nil {
			t.Fatal(err)
		}
		prep(tor.name, conf)
	}

	// 3. All sessions Established.
	took := startAll(t, insts, 60*time.Second)
	t.Logf("FIGURE: dual ToR (2 nodes + 2 ToRs, 4 eBGP sessions): all Established %v after the first start", took.Round(time.Millisecond))

	// 4. Each node: one route to the other's block, one nexthop per ToR.
	for i, nd := range c.Nodes {
		other := c.Blocks[1-i].CIDR
		exp := []string{fmt.Sprintf("172.31.1%d.1@eth0", i+1), fmt.Sprintf("172.31.2%d.1@eth1", i+1)}
		var got []string
		eventually(t, 10*time.Second, nd.Name+" multipath route to "+other, func() string {
			r, ok := l.birdRoutes(nd.Name, netlink.FAMILY_V4)[other]
			if !ok {
				return "no proto bird route"
			}
			got = nexthops(l, nd.Name, r)
			if fmt.Sprint(got) != fmt.Sprint(exp) {
				return fmt.Sprintf("nexthops %v, want %v", got, exp)
			}
			return ""
		})
		// BIRD's table holds one route per ToR; the kernel protocol merges
		// them (merge paths on) on export.
		rs, err := byName[nd.Name].Client().Routes(context.Background(), "for "+other)
		if err != nil || len(rs) != 2 || rs[0].Protocol == rs[1].Protocol {
			t.Errorf("%s: BIRD's routes to %s: %+v %v, want two, one from each ToR", nd.Name, other, rs, err)
		}
	}
	if err := l.udpEcho("n1", "10.244.1.1", "n2", "10.244.2.1"); err != nil {
		t.Errorf("UDP echo n1 -> n2 across the ToRs: %v", err)
	}
	for _, name := range []string{"n1", "ta"} {
		rss, _ := byName[name].RSS()
		t.Logf("FIGURE: RSS of bird on %s: %.1f MiB", name, float64(rss)/(1<<20))
	}

	// 5. ToR a goes away (SIGTERM: Cease): single path via ToR b.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := byName["ta"].Stop(ctx, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "n1 falls back to ToR b", func() string {
		r, ok := l.birdRoutes("n1", netlink.FAMILY_V4)["10.244.2.0/26"]
		if !ok {
			return "no route"
		}
		if got := nexthops(l, "n1", r); fmt.Sprint(got) != "[172.31.21.1@eth1]" {
			return fmt.Sprintf("nexthops %v", got)
		}
		return ""
	})
	t.Logf("FIGURE: ToR a stopped (SIGTERM): n1's route to n2's block single-path via ToR b within %v of the signal (Stop includes container removal)", time.Since(start).Round(time.Millisecond))
	if err := l.udpEcho("n1", "10.244.1.1", "n2", "10.244.2.1"); err != nil {
		t.Errorf("UDP echo n1 -> n2 via ToR b only: %v", err)
	}
}
