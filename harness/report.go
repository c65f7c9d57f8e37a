package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/birdcage/birdcage/dataplane/supervisor"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/report/results"
)

// Result assembles a ScenarioResult from the cluster's events, restarts and
// a probe report.
func (c *Cluster) Result(name string, rep *report.Report) results.ScenarioResult {
	timing := c.timing
	s := results.ScenarioResult{Name: name, Topology: c.Net.Topology.Name, Tunnel: c.Net.Tunnel, Probes: rep, Events: c.Events(), Figures: map[string]float64{}, FigureKinds: map[string]results.FigureKind{}, Timing: &timing}
	s.Notes = append(s.Notes, c.Warnings()...)
	var routeNotes []string
	s.RouteEvents, routeNotes = c.clusterRouteEvents()
	s.Notes = append(s.Notes, routeNotes...)
	if ev := c.Events(); len(ev) > 0 {
		s.Duration = monoclock.Ms(monoclock.Now()-ev[0].Mono) / 1000
	}
	s.BIRDReleases = c.Measure().BIRDReleases()
	s.Releases, s.Departures = c.Measure().releases()
	s.ProgrammerProtocol = int(c.ProgrammerProtocol(context.Background()))
	s.Flavours, s.Components = c.flavours()
	for _, n := range c.nodes {
		if n.Programmer == nil {
			continue
		}
		if rs := n.Programmer.Restarts(); len(rs) > 0 {
			if s.Restarts == nil {
				s.Restarts = map[string][]supervisor.Restart{}
			}
			s.Restarts[n.Name] = rs
		}
	}
	return s
}

// Diagnose writes what a person needs to see why a scenario failed into
// dir: per node its routes and links, BIRD's protocols and routes, BIRD and
// programmer logs and status, the route timeline; plus the events.
func (c *Cluster) Diagnose(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(name string, v any) {
		var b []byte
		switch x := v.(type) {
		case string:
			b = []byte(x)
		case []byte:
			b = x
		default:
			b, _ = json.MarshalIndent(v, "", "  ")
		}
		_ = os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	write("events.json", c.Events())
	for _, n := range c.nodes {
		p := n.Name + "."
		if rs, err := n.Routes(zeroPrefix); err == nil {
			var lines []string
			for _, r := range rs {
				lines = append(lines, r.String())
			}
			write(p+"routes.txt", strings.Join(lines, "\n")+"\n")
		}
		write(p+"links.txt", linkDump(n))
		if n.Calico != nil {
			c.diagnoseCalico(ctx, n, dir, write)
			if m := c.Timeline(n.Name); m != nil {
				write(p+"timeline.json", m.Events())
			}
			continue
		}
		if n.BIRD.Running() {
			for cmd, file := range map[string]string{"show protocols all": "bird-protocols.txt", "show route all": "bird-routes.txt"} {
				if reply, err := n.BIRD.Client().Run(ctx, cmd); err == nil {
					write(p+file, reply.Text())
				} else {
					write(p+file, "birdc "+cmd+": "+err.Error())
				}
			}
		}
		copyFile(n.BIRD.LogPath(), filepath.Join(dir, p+"bird.log"))
		copyFile(n.BIRD.ConfigPath(), filepath.Join(dir, p+"bird.conf"))
		copyFile(n.Programmer.LogPath(), filepath.Join(dir, p+"programmer.log"))
		copyFile(n.Programmer.StatusPath(), filepath.Join(dir, p+"programmer-status.json"))
		write(p+"programmer-restarts.json", n.Programmer.Restarts())
		if m := c.Timeline(n.Name); m != nil {
			write(p+"timeline.json", m.Events())
		}
	}
	for _, r := range c.routers {
		copyFile(r.BIRD.LogPath(), filepath.Join(dir, r.Name+".bird.log"))
		if reply, err := r.BIRD.Client().Run(ctx, "show protocols all"); err == nil {
			write(r.Name+".bird-protocols.txt", reply.Text())
		}
	}
	return nil
}

var zeroPrefix = netipPrefixZero()

func linkDump(n *Node) string {
	h, err := n.NS.Handle()
	if err != nil {
		return err.Error()
	}
	defer h.Close()
	links, err := nsutil.Links(h)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, l := range links {
		a := l.Attrs()
		fmt.Fprintf(&b, "%d: %s %s mtu %d %s state %s\n", a.Index, a.Name, l.Type(), a.MTU, a.Flags, a.OperState)
	}
	return b.String()
}

func copyFile(from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		return
	}
	_ = os.WriteFile(to, b, 0o644)
}

func netipPrefixZero() netip.Prefix { return netip.Prefix{} }
