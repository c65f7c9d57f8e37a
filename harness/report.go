package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/harness/probe"
	"github.com/birdcage/birdcage/harness/supervisor"
	"github.com/birdcage/birdcage/harness/timeline"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/nsutil"
)

// ArtifactsEnv overrides where diagnostics and the results file go.
const ArtifactsEnv = "BIRDCAGE_ARTIFACTS"

// ArtifactsDir is where diagnostics and results files go, the same place
// whatever the working directory: $BIRDCAGE_ARTIFACTS, else artifacts/ at
// the root of the birdcage checkout the working directory is in (go test
// runs a package's tests in the package's directory, the CLI runs wherever
// it is started), else ./artifacts outside a checkout.
func ArtifactsDir() string {
	if d := os.Getenv(ArtifactsEnv); d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
		return d
	}
	if root, err := moduleRoot(); err == nil {
		return filepath.Join(root, "artifacts")
	}
	d, _ := filepath.Abs("artifacts")
	return d
}

// Verdict is how a scenario's spec ended.
type Verdict string

const (
	VerdictPass Verdict = "pass"
	VerdictFail Verdict = "fail"
	VerdictSkip Verdict = "skip"
)

// ScenarioResult is one scenario's row: how its spec ended and the figures
// it registered, for the report and for comparing two runs. The suite
// writes exactly one per spec that ran, from the spec's final state (after
// its cleanup), whether or not the spec got as far as registering figures.
type ScenarioResult struct {
	Name string `json:"name"`
	// Spec is the spec's full text (Name is the scenario's own title when
	// it registered one, else the same).
	Spec     string   `json:"spec,omitempty"`
	Labels   []string `json:"labels,omitempty"`
	Topology string   `json:"topology"`
	Verdict  Verdict  `json:"verdict,omitempty"`
	// Passed is Verdict == pass, kept for older readers.
	Passed bool `json:"passed"`
	// Failure is why the spec failed (the assertion's message, and any
	// later failure such as a teardown's), or why it was skipped.
	Failure         string `json:"failure,omitempty"`
	FailureLocation string `json:"failureLocation,omitempty"`
	// Registered says whether the spec registered its figures before it
	// ended (false: it failed or skipped first).
	Registered bool                            `json:"registered"`
	Duration   float64                         `json:"durationSeconds"`
	Figures    map[string]float64              `json:"figures,omitempty"`
	Notes      []string                        `json:"notes,omitempty"`
	Probes     *probe.Report                   `json:"probes,omitempty"`
	Events     []Event                         `json:"events,omitempty"`
	Restarts   map[string][]supervisor.Restart `json:"restarts,omitempty"`
	// ProgrammerProtocol is the route protocol the programmers wrote with
	// (FelixConfiguration.deviceRouteProtocol, Calico's default when unset):
	// what the report calls "the programmer's" in the route timeline.
	ProgrammerProtocol int `json:"programmerProtocol,omitempty"`
	// Tunnel is how the nodes' tunl0 was made ("kernel", "ebpf"); empty
	// when the topology has no IPIP pool.
	Tunnel string `json:"tunnel,omitempty"`
	// Timing is the timing model the scenario ran under: its figures are
	// functions of it.
	Timing *TimingModel `json:"timing,omitempty"`
	// Samples holds figures measured more than once in one scenario (per
	// node, per flow, per repeat), each as its distribution with every
	// sample.
	Samples map[string]Stats `json:"samples,omitempty"`
	// Sweep is a figure measured as a function of a model knob, with its
	// fit (sweep scenarios only).
	Sweep *Sweep `json:"sweep,omitempty"`
	// BIRDReleases is the BIRD release each node and router ran at the end
	// ("3.1 (bird3 3.1.8-0+deb13u1)").
	BIRDReleases map[string]string `json:"birdReleases,omitempty"`
	// RouteEvents is each node's route timeline of cluster routes (inside
	// the topology's pools, main table), for the report's swimlanes;
	// absent in files written before it existed.
	RouteEvents map[string][]timeline.Event `json:"routeEvents,omitempty"`
	// Budget is the disruption budget the scenario holds itself to, if
	// any; `birdcage compare` judges it per flow.
	Budget *Budget `json:"budget,omitempty"`
	// Captures are the per-node packet captures of the probe window
	// ($BIRDCAGE_PCAP), if any.
	Captures []CaptureFile `json:"captures,omitempty"`
}

// VerdictOf is the row's verdict, for files written before Verdict
// existed (only Passed then).
func (s ScenarioResult) VerdictOf() Verdict {
	if s.Verdict != "" {
		return s.Verdict
	}
	if s.Passed {
		return VerdictPass
	}
	return VerdictFail
}

// Results is the run's results file: every scenario's figures as JSON.
type Results struct {
	path string
	join string
	mu   sync.Mutex
	doc  ResultsFile
}

// ResultsJoinEnv, when set, is a token naming one run whose several
// processes write one results file at once (ci/test runs independent specs
// in concurrent go test processes). Each process opens the file without
// starting it afresh unless it was another run's (another token, or none),
// and adds each row under a lock on the file's directory after reading
// back what the others added, so no process's row is lost. Unset: the
// process owns the file and starts it afresh.
const ResultsJoinEnv = "BIRDCAGE_RESULTS_JOIN"

// ResultsPath is where a scenario run on this kernel writes its results:
// one file per kernel, so a native run and a VM run side by side keep both.
func ResultsPath() string {
	k := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		k = strings.TrimSpace(string(b))
	}
	return filepath.Join(ArtifactsDir(), resultsName(k, os.Getenv(LabEnv)))
}

// LabEnv names the lab manifest (or "handmade") the scenarios run against
// instead of birdcage's own clusters (harness/lab).
const LabEnv = "BIRDCAGE_LAB"

// resultsName is results-<kernel>.json, and results-lab-<lab>-<kernel>.json
// for a run against a lab, so a lab run beside a normal one (as ci/test
// does) does not overwrite the normal run's rows.
func resultsName(kernel, lab string) string {
	if lab == "" {
		return "results-" + kernel + ".json"
	}
	name := strings.TrimSuffix(filepath.Base(lab), filepath.Ext(lab))
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, name)
	return "results-lab-" + name + "-" + kernel + ".json"
}

// OpenResults starts a results file at path (its dir is created), or, with
// $BIRDCAGE_RESULTS_JOIN set, joins the file that run's other processes
// write (OpenResultsJoin).
func OpenResults(path string) (*Results, error) {
	return OpenResultsJoin(path, os.Getenv(ResultsJoinEnv))
}

// OpenResultsJoin opens path as one of the processes of the run named join
// ("": the only one).
func OpenResultsJoin(path, join string) (*Results, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("results file %s: %w", path, err)
	}
	r := &Results{path: path, join: join}
	r.doc.Started = time.Now()
	r.doc.Env = CurrentRunEnv()
	r.doc.Join = join
	r.doc.Scenarios = []ScenarioResult{} // an empty run reads back as one
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		r.doc.Kernel = strings.TrimSpace(string(b))
	}
	if join == "" {
		return r, r.write()
	}
	err := r.locked(func() error {
		if cur, ok, err := r.joined(); err != nil || ok {
			if ok {
				r.doc = *cur
			}
			return err
		}
		return r.write()
	})
	return r, err
}

// Path is where the results are written.
func (r *Results) Path() string { return r.path }

// Add records one scenario and rewrites the file (joining: the file as the
// run's other processes left it, plus this row).
func (r *Results) Add(s ScenarioResult) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	add := func() error {
		// The run's tunnel is known once a topology was built.
		if r.doc.Env != nil && r.doc.Env.Tunnel == "" && s.Tunnel != "" {
			r.doc.Env.Tunnel = s.Tunnel
		}
		r.doc.Scenarios = append(r.doc.Scenarios, s)
		r.doc.Repeats = summarizeRepeats(r.doc.Scenarios)
		return r.write()
	}
	if r.join == "" {
		return add()
	}
	return r.locked(func() error {
		cur, ok, err := r.joined()
		if err != nil {
			return err
		}
		if ok {
			r.doc = *cur
		}
		return add()
	})
}

// joined reads the file as this run's processes wrote it: ok is false when
// there is none yet or it is another run's.
func (r *Results) joined() (*ResultsFile, bool, error) {
	if _, err := os.Stat(r.path); errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	cur, err := ReadResults(r.path)
	if err != nil {
		return nil, false, fmt.Errorf("joining run %s: %w", r.join, err)
	}
	if cur.Join != r.join {
		return nil, false, nil
	}
	return cur, true, nil
}

// locked runs fn holding an exclusive lock on the results file's directory
// (a lock on the directory leaves no lock file behind).
func (r *Results) locked(fn func() error) error {
	dir := filepath.Dir(r.path)
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("results file %s: %w", r.path, err)
	}
	defer d.Close()
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("results file %s: lock %s: %w", r.path, dir, err)
	}
	defer unix.Flock(int(d.Fd()), unix.LOCK_UN)
	return fn()
}

func (r *Results) write() error {
	b, err := json.MarshalIndent(r.doc, "", "  ")
	if err != nil {
		return err
	}
	// One temporary name per process: joined processes write in turn, but
	// never through one another's temporary file.
	tmp := fmt.Sprintf("%s.tmp.%d", r.path, os.Getpid())
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
	fmt.Fprintln(w, "flow\tsent\treceived\tlost\tlate\tdup\tlongest gap ms\tsender pause in it ms\tgap began\t")
	flows := append([]probe.GapReport(nil), rep.Flows...)
	sort.Slice(flows, func(i, j int) bool { return flows[i].Flow < flows[j].Flow })
	for _, f := range flows {
		began := "-"
		if f.Gap.Mark != "" && f.Lost > 0 {
			began = fmt.Sprintf("%+.1f ms after %s", f.Gap.SinceMarkMs, f.Gap.Mark)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%s\t\n", f.Flow, f.Sent, f.Received, f.Lost, f.Late, f.Duplicates,
			f.LongestGapMs, f.SenderPauseInGapMs, began)
	}
	fmt.Fprintf(w, "total (%d flows, %d with loss)\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%s\t\n", rep.Total.Flows, rep.Total.FlowsWithLoss,
		rep.Total.Sent, rep.Total.Received, rep.Total.Lost, rep.Total.Late, rep.Total.Duplicates, rep.Total.LongestGapMs,
		rep.Total.SenderPauseInGapMs, rep.Total.LongestGapFlow)
	w.Flush()
	return b.String()
}

// Result assembles a ScenarioResult from the cluster's events, restarts and
// a probe report.
func (c *Cluster) Result(name string, rep *probe.Report) ScenarioResult {
	timing := c.timing
	s := ScenarioResult{Name: name, Topology: c.Net.Topology.Name, Tunnel: c.Net.Tunnel, Probes: rep, Events: c.Events(), Figures: map[string]float64{}, Timing: &timing}
	s.Notes = append(s.Notes, c.Warnings()...)
	var routeNotes []string
	s.RouteEvents, routeNotes = c.clusterRouteEvents()
	s.Notes = append(s.Notes, routeNotes...)
	if ev := c.Events(); len(ev) > 0 {
		s.Duration = monoclock.Ms(monoclock.Now()-ev[0].Mono) / 1000
	}
	s.BIRDReleases = c.BIRDReleases()
	s.ProgrammerProtocol = int(c.ProgrammerProtocol(context.Background()))
	for _, n := range c.nodes {
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
