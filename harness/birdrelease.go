package harness

import (
	"fmt"
	"sort"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/topo"
)

// nodeBIRD resolves the BIRD release a node runs (on 1.x the node's
// bird.Instance drives bird and bird6 together, configured with both of
// confd's configs): Options.NodeBIRD[node],
// else Options.BIRD, else the default (the host's bird2 2.0). A release that
// is not prepared wraps bird.ErrReleaseMissing, so a scenario can skip
// naming it.
func nodeBIRD(o Options, node string) (bird.Release, error) {
	name := o.BIRD
	if v, ok := o.NodeBIRD[node]; ok {
		name = v
	}
	return findNodeBIRD(o.BIRDCache, node, name)
}

func findNodeBIRD(cache, node, name string) (bird.Release, error) {
	rel, err := bird.FindRelease(cache, name)
	if err != nil {
		return bird.Release{}, fmt.Errorf("node %s: %w", node, err)
	}
	return rel, nil
}

// checkNodeBIRD refuses a per-node override for a node the topology does
// not have, so a typo cannot leave a node on the default release.
func checkNodeBIRD(o Options, net *topo.Network) error {
	known := map[string]bool{}
	var nodes []string
	for _, n := range net.Nodes {
		known[n.Name] = true
		nodes = append(nodes, n.Name)
	}
	for n, r := range o.NodeBIRD {
		if !known[n] {
			sort.Strings(nodes)
			return fmt.Errorf("Options.NodeBIRD: node %q (BIRD %s) is not in the topology (nodes: %v)", n, r, nodes)
		}
		if _, err := release.Parse(r); err != nil {
			return fmt.Errorf("Options.NodeBIRD[%s]: %w", n, err)
		}
	}
	if _, err := release.Parse(o.BIRD); err != nil {
		return fmt.Errorf("Options.BIRD: %w", err)
	}
	return nil
}

// BIRDRelease is the BIRD release a node runs now.
// On a calico node it is the zero Release: its BIRD is the image's
// (CalicoVersions says which).
func (n *Node) BIRDRelease() bird.Release {
	if n.BIRD == nil {
		return bird.Release{}
	}
	return n.BIRD.Release()
}

// BIRDReleases maps every node and BGP-speaking router to the BIRD release
// it runs now (release name and Debian package), for results.
func (m *Measure) BIRDReleases() map[string]string {
	out := map[string]string{}
	for _, n := range m.c.nodes {
		if n.Calico != nil {
			out[n.Name] = "calico (" + n.CalicoVersions().BIRD + ")"
			continue
		}
		r := n.BIRD.Release()
		out[n.Name] = string(r.Name) + " (" + r.Package + ")"
	}
	for _, rt := range m.c.routers {
		r := rt.BIRD.Release()
		out[rt.Name] = string(r.Name) + " (" + r.Package + ")"
	}
	return out
}

// releases is each node's Calico release profile and its render's
// departures from it (nil when no node departs).
func (m *Measure) releases() (map[string]string, map[string][]string) {
	rel := map[string]string{}
	var dep map[string][]string
	for _, n := range m.c.nodes {
		n.mu.Lock()
		rel[n.Name] = string(n.release)
		if len(n.departures) > 0 {
			if dep == nil {
				dep = map[string][]string{}
			}
			dep[n.Name] = append([]string(nil), n.departures...)
		}
		n.mu.Unlock()
	}
	return rel, dep
}

// upgradeBIRD switches a stopped node's BIRD to release name (UpgradeOptions.BIRD).
func (c *Cluster) upgradeBIRD(n *Node, name string) error {
	rel, err := findNodeBIRD(c.opts.BIRDCache, n.Name, name)
	if err != nil {
		return err
	}
	from := n.BIRD.Release().Name
	if err := n.BIRD.SetRelease(rel); err != nil {
		return err
	}
	c.Mark(fmt.Sprintf("BIRD(%s) %s→%s", n.Name, from, rel.Name))
	return nil
}
