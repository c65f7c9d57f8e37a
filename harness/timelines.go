package harness

import (
	"fmt"
	"sort"

	"github.com/birdcage/birdcage/instrument/timeline"
)

// Timeline is the route monitor of a node, running since Start.
func (c *Cluster) Timeline(node string) *timeline.Monitor {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timelines[node]
}

func (c *Cluster) startTimelines() error {
	c.timelines = map[string]*timeline.Monitor{}
	for _, nd := range c.Net.Nodes {
		m, err := timeline.Start(timeline.Options{Name: nd.Name, Netns: nd.Path})
		if err != nil {
			return fmt.Errorf("route timeline of %s: %w", nd.Name, err)
		}
		c.Run.DeferLocal("route timeline "+nd.Name, m.Close)
		c.timelines[nd.Name] = m
	}
	return nil
}

// timelineGapsLocked is a warning per route-monitor subscription gap: the
// windows, deletes and flaps judged over one are unjudgeable (and fail).
// c.mu is held.
func (c *Cluster) timelineGapsLocked() []string {
	var out []string
	for _, m := range c.timelines {
		for _, g := range m.Gaps() {
			out = append(out, "route timeline: "+g.String()+": window, delete and flap checks over it are unjudgeable")
		}
	}
	sort.Strings(out)
	return out
}
