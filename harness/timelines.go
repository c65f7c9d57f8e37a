package harness

import (
	"fmt"

	"github.com/birdcage/birdcage/harness/timeline"
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
