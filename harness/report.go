package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/birdcage/birdcage/harness/probe"
	"github.com/birdcage/birdcage/internal/monoclock"
)

// ArtifactsEnv overrides where diagnostics and the results file go.
const ArtifactsEnv = "BIRDCAGE_ARTIFACTS"

// ArtifactsDir is $BIRDCAGE_ARTIFACTS, else ./artifacts.
func ArtifactsDir() string {
	if d := os.Getenv(ArtifactsEnv); d != "" {
		return d
	}
	d, _ := filepath.Abs("artifacts")
	return d
}

// ScenarioResult is one scenario's figures, for the report and for
// comparing two runs.
type ScenarioResult struct {
	Name     string               `json:"name"`
	Labels   []string             `json:"labels,omitempty"`
	Topology string               `json:"topology"`
	Passed   bool                 `json:"passed"`
	Duration float64              `json:"durationSeconds"`
	Figures  map[string]float64   `json:"figures,omitempty"`
	Notes    []string             `json:"notes,omitempty"`
	Probes   *probe.Report        `json:"probes,omitempty"`
	Events   []Event              `json:"events,omitempty"`
	Restarts map[string][]Restart `json:"restarts,omitempty"`
	// BIRDReleases is the BIRD release each node and router ran at the end
	// ("3.1 (bird3 3.1.8-0+deb13u1)").
	BIRDReleases map[string]string `json:"birdReleases,omitempty"`
}

// Results is the run's results file: every scenario's figures as JSON.
type Results struct {
	path string
	mu   sync.Mutex
	doc  struct {
		Started   time.Time        `json:"started"`
		Kernel    string           `json:"kernel"`
		Scenarios []ScenarioResult `json:"scenarios"`
	}
}

// ResultsPath is where a scenario run on this kernel writes its results:
// one file per kernel, so a native run and a VM run side by side keep both.
func ResultsPath() string {
	k := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		k = strings.TrimSpace(string(b))
	}
	return filepath.Join(ArtifactsDir(), "results-"+k+".json")
}

// OpenResults starts a results file at path (its dir is created).
func OpenResults(path string) (*Results, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("results file %s: %w", path, err)
	}
	r := &Results{path: path}
	r.doc.Started = time.Now()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		r.doc.Kernel = strings.TrimSpace(string(b))
	}
	return r, r.write()
}

// Path is where the results are written.
func (r *Results) Path() string { return r.path }

// Add records one scenario and rewrites the file.
func (r *Results) Add(s ScenarioResult) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.doc.Scenarios = append(r.doc.Scenarios, s)
	return r.write()
}

func (r *Results) write() error {
	b, err := json.MarshalIndent(r.doc, "", "  ")
	if err != nil {
		return err
	}
	tmp := r.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, r.path)
}

// GapTable renders a probe report as a table a person reads: one row per
// flow with what was sent, lost, the longest gap and when it began.
func GapTable(rep *probe.Report) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "flow\tsent\treceived\tlost\tlongest gap ms\tgap began\t")
	flows := append([]probe.GapReport(nil), rep.Flows...)
	sort.Slice(flows, func(i, j int) bool { return flows[i].Flow < flows[j].Flow })
	for _, f := range flows {
		began := "-"
		if f.Gap.Mark != "" && f.Lost > 0 {
			began = fmt.Sprintf("%+.1f ms after %s", f.Gap.SinceMarkMs, f.Gap.Mark)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%.1f\t%s\t\n", f.Flow, f.Sent, f.Received, f.Lost, f.LongestGapMs, began)
	}
	fmt.Fprintf(w, "total (%d flows, %d with loss)\t%d\t%d\t%d\t%.1f\t%s\t\n", rep.Total.Flows, rep.Total.FlowsWithLoss,
		rep.Total.Sent, rep.Total.Received, rep.Total.Lost, rep.Total.LongestGapMs, rep.Total.LongestGapFlow)
	w.Flush()
	return b.String()
}

// Result assembles a ScenarioResult from the cluster's events, restarts and
// a probe report.
func (c *Cluster) Result(name string, rep *probe.Report) ScenarioResult {
	s := ScenarioResult{Name: name, Topology: c.Net.Topology.Name, Probes: rep, Events: c.Events(), Figures: map[string]float64{}}
	if ev := c.Events(); len(ev) > 0 {
		s.Duration = monoclock.Ms(monoclock.Now()-ev[0].Mono) / 1000
	}
	s.BIRDReleases = c.BIRDReleases()
	for _, n := range c.nodes {
		if rs := n.Programmer.Restarts(); len(rs) > 0 {
			if s.Restarts == nil {
				s.Restarts = map[string][]Restart{}
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
	links, err := h.LinkList()
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
