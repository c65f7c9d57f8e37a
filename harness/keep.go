package harness

import (
	"fmt"
	"strings"
)

// Keep leaves the cluster up when this process exits instead of tearing it
// down: namespaces, BIRD containers and programmers stay, with the run's
// prefix and state dir, and a manifest marked kept, so `birdcage exec`,
// `routes`, `status` and `down` find it and `birdcage clean` leaves it
// alone (it counts as alive). What lives only in this process (the route
// timelines, the probe session, confd's datastore watch) stops now: nothing
// re-renders BIRD's config afterwards, and a programmer that exits is no
// longer restarted once this process has gone. It returns the lines that
// tell a person how to get in.
func (c *Cluster) Keep() ([]string, error) {
	if err := c.Net.WriteManifest(true); err != nil {
		return nil, fmt.Errorf("keep run %s: %w", c.Run.ID, err)
	}
	if err := c.Run.Keep(); err != nil {
		return nil, err
	}
	return c.keepHelp(), nil
}

func (c *Cluster) keepHelp() []string {
	id := c.Run.ID
	var nodes, routers []string
	for _, n := range c.nodes {
		nodes = append(nodes, n.Name)
	}
	for _, r := range c.routers {
		routers = append(routers, r.Name)
	}
	where := "nodes " + strings.Join(nodes, ", ")
	if len(routers) > 0 {
		where += "; routers " + strings.Join(routers, ", ")
	}
	n := "node-1"
	if len(nodes) > 0 {
		n = nodes[0]
	}
	lines := []string{
		fmt.Sprintf("run %s is kept up (topology %s: %s); workloads are NODE-w0, NODE-w1, ...", id, c.Net.Topology.Name, where),
		fmt.Sprintf("  birdcage exec --run %s %s -- ip route", id, n),
		fmt.Sprintf("  birdcage routes --run %s %s", id, n),
		fmt.Sprintf("  birdcage status --run %s", id),
	}
	if len(nodes) > 0 && c.nodes[0].BIRD != nil {
		b := c.nodes[0].BIRD
		lines = append(lines, fmt.Sprintf("  birdc -s %s show protocols      (%s's BIRD; log %s)", b.Client().Socket, n, b.LogPath()))
	}
	lines = append(lines,
		fmt.Sprintf("  programmer logs, configs, sockets: %s", c.Run.Dir),
		fmt.Sprintf("  remove it: birdcage down %s", id))
	return lines
}
