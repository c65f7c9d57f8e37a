// Package results is birdcage's results model: the results file and its
// rows (one ScenarioResult per spec run), verdicts, figure kinds, the
// distributions of repeated figures, sweeps and their fits, disruption
// budgets and text tables. It imports no cluster code: only the data types
// its rows record from the rooms below it (the probe report, route events,
// restarts, capture stats, the timing model), so the tools that only read
// results files (report/compare, report/htmlreport, `birdcage report` and
// `compare`) need nothing else.
package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/dataplane/supervisor"
	"github.com/birdcage/birdcage/dataplane/timing"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/instrument/timeline/event"
)

// ArtifactsDir is where diagnostics and results files go, the same place
// whatever the working directory: dir (the run's $BIRDCAGE_ARTIFACTS, from
// internal/env) made absolute, else artifacts/ at the root of the birdcage
// checkout the working directory is in (go test runs a package's tests in
// the package's directory, the CLI runs wherever it is started), else
// ./artifacts outside a checkout.
func ArtifactsDir(dir string) string {
	if d := dir; d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
		return d
	}
	if root, err := ModuleRoot(); err == nil {
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
	Registered bool               `json:"registered"`
	Duration   float64            `json:"durationSeconds"`
	Figures    map[string]float64 `json:"figures,omitempty"`
	// FigureKinds is each figure's kind as it was recorded (Figure), what
	// compare judges it by; "" for a figure with no declared kind (then
	// compare does not judge it). Absent in files written before kinds
	// existed: compare then falls back to judging by name.
	FigureKinds map[string]FigureKind           `json:"figureKinds,omitempty"`
	Notes       []string                        `json:"notes,omitempty"`
	Probes      *report.Report                  `json:"probes,omitempty"`
	Events      []Event                         `json:"events,omitempty"`
	Restarts    map[string][]supervisor.Restart `json:"restarts,omitempty"`
	// ProgrammerProtocol is the route protocol the programmers wrote with
	// (FelixConfiguration.deviceRouteProtocol, Calico's default when unset):
	// what the report calls "the programmer's" in the route timeline.
	ProgrammerProtocol int `json:"programmerProtocol,omitempty"`
	// Timing is the timing model the scenario ran under: its figures are
	// functions of it.
	Timing *timing.Model `json:"timing,omitempty"`
	// Samples holds figures measured more than once in one scenario (per
	// node, per flow, per repeat), each as its distribution with every
	// sample.
	Samples map[string]Stats `json:"samples,omitempty"`
	// Sweep is a figure measured as a function of a model knob, with its
	// fit (sweep scenarios only).
	Sweep *Sweep `json:"sweep,omitempty"`
	// Tunnel is how the nodes' tunl0 was made ("kernel", "ebpf"); empty
	// when the topology has no IPIP pool.
	Tunnel string `json:"tunnel,omitempty"`
	// BIRDReleases is the BIRD release each node and router ran at the end
	// ("3.1 (bird3 3.1.8-0+deb13u1)").
	BIRDReleases map[string]string `json:"birdReleases,omitempty"`
	// Flavours is what ran on each node at the end: "model" (birdcage's
	// programmer, renderer and upstream BIRD) or "calico" (Calico's own
	// Felix, confd and BIRD); absent in files written before flavours.
	Flavours map[string]string `json:"flavours,omitempty"`
	// Components are each node's component versions as its binaries
	// report them ("calico": `calico version`, "bird": `bird --version`
	// on a calico node; "bird" the package on a model node).
	Components map[string]map[string]string `json:"components,omitempty"`
	// Releases is the Calico release profile each node ran at the end
	// ("3.32", "3.33"; never an alias).
	Releases map[string]string `json:"releases,omitempty"`
	// Departures are the ways the rendered BIRD configs departed from
	// their release (knobs, timers), per node; absent when none did.
	Departures map[string][]string `json:"departures,omitempty"`
	// RouteEvents is each node's route timeline of cluster routes (inside
	// the topology's pools, main table), for the report's swimlanes;
	// absent in files written before it existed.
	RouteEvents map[string][]event.Event `json:"routeEvents,omitempty"`
	// Budget is the disruption budget the scenario holds itself to, if
	// any; `birdcage compare` judges it per flow.
	Budget *Budget `json:"budget,omitempty"`
	// Captures are the per-node packet captures of the probe window
	// ($BIRDCAGE_PCAP), if any.
	Captures []CaptureFile `json:"captures,omitempty"`
	// UpstreamBIRD marks a verdict whose outcome rests on how upstream
	// BIRD writes the kernel, where Calico's BIRD 1.6 fork writes it
	// otherwise: the verdict is this BIRD's, not necessarily Calico's.
	UpstreamBIRD []BIRDDependence `json:"upstreamBIRD,omitempty"`
	// Conformance is the model-vs-real case this row measures, if any
	// (conformance.go).
	Conformance *Conformance `json:"conformance,omitempty"`
	// RouteRequests are the route requests the netlink trace recorded per
	// node, for the specs that trace (oldest first).
	RouteRequests map[string][]KernelRequest `json:"routeRequests,omitempty"`
}

// ForkCommit is the commit of Calico's BIRD fork (projectcalico/bird,
// branch feature-ipinip, v0.3.3-208-g1e2ff99d) its kernel-write behaviour
// was read at. Calico pins v0.3.3-211-g9111ec3c (metadata.mk at
// release-v3.31 3cdeae8f, v3.32 de60d98e, v3.33 6609dea5); that commit is
// three past this one and was not to be had.
const ForkCommit = "1e2ff99d"

// BIRDDependence is one way a verdict depends on upstream BIRD.
type BIRDDependence struct {
	// Behaviour is what upstream BIRD does that the verdict rests on.
	Behaviour string `json:"behaviour"`
	// Fork is what Calico's fork does instead, with where (file, function)
	// at ForkCommit.
	Fork string `json:"fork"`
	// Differs is how the verdict would differ on the fork.
	Differs string `json:"differs"`
	// OnBIRD16 says whether upstream BIRD 1.6.8 (Debian, the fork's base)
	// shares the fork's behaviour here, so a 1.6 run shows the fork's side.
	OnBIRD16 bool `json:"onBIRD16,omitempty"`
}

// DependsOnUpstreamBIRD marks the row's verdict as resting on upstream
// BIRD's behaviour d.Behaviour, and adds a note saying so for readers of
// the notes alone.
func (s *ScenarioResult) DependsOnUpstreamBIRD(d BIRDDependence) {
	s.UpstreamBIRD = append(s.UpstreamBIRD, d)
	s.Notes = append(s.Notes, fmt.Sprintf("verdict rests on upstream BIRD: %s; Calico's fork (projectcalico/bird %s) instead %s; so on the fork %s", d.Behaviour, ForkCommit, d.Fork, d.Differs))
}

// Key is the row's identity across runs: the spec's full text (its
// containers' texts and its own, an entry's included), which every row the
// suite writes carries whether or not the spec got as far as registering a
// title of its own; Name for rows written outside the suite. Comparisons
// pair rows by Key, never by the registered title, so a spec that fails
// before it registers still meets its BASE row.
func (s ScenarioResult) Key() string {
	if s.Spec != "" {
		return s.Spec
	}
	return s.Name
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

// ResultsPath is where a scenario run on this kernel writes its results:
// one file per kernel, so a native run and a VM run side by side keep both,
// and one per lab (lab, the run's $BIRDCAGE_LAB) under artifacts
// (ArtifactsDir's dir).
func ResultsPath(artifacts, lab string) string {
	k := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		k = strings.TrimSpace(string(b))
	}
	return filepath.Join(ArtifactsDir(artifacts), resultsName(k, lab))
}

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

// OpenResultsJoin starts a results file at path (its dir is created), or,
// with join set (the run's $BIRDCAGE_RESULTS_JOIN: a token naming one run
// whose several processes write one results file at once, as ci/test's
// concurrent go test processes do), joins the file that run's other
// processes write: each adds its rows under a lock on the file's directory
// after reading back what the others added, so no process's row is lost.
// join "": the process owns the file and starts it afresh. env is where the
// run happens (the harness's CurrentRunEnv), recorded in the file.
func OpenResultsJoin(path, join string, env *RunEnv) (*Results, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("results file %s: %w", path, err)
	}
	r := &Results{path: path, join: join}
	r.doc.Started = time.Now()
	r.doc.Env = env
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
	s.MarkUndeclaredFigures()
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
func GapTable(rep *report.Report) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "flow\tsent\treceived\tlost\tlate\tdup\tlongest gap ms\tsender pause in it ms\tgap began\t")
	flows := append([]report.GapReport(nil), rep.Flows...)
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

// ModuleRoot is the root of the birdcage checkout the working directory is
// in.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/birdcage/birdcage\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("birdcage's go.mod not found above the working directory")
		}
		dir = parent
	}
}
