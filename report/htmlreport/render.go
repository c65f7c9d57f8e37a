package htmlreport

import (
	"fmt"
	"html"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/report/compare"
	"github.com/birdcage/birdcage/report/results"
)

type (
	gapReport = report.GapReport
	deliveryT = report.Delivery
)

// Run is one results file to render, with the name it is shown under.
type Run struct {
	Name string
	File *results.ResultsFile
}

// Render writes the report of runs as one HTML page.
func Render(w io.Writer, title string, runs []Run) error {
	var b strings.Builder
	head(&b, title)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(title))
	legend(&b)
	for ri, r := range runs {
		runHeader(&b, r)
		b.WriteString(`<nav class="toc"><ol>`)
		for si, s := range r.File.Scenarios {
			fmt.Fprintf(&b, `<li><a href="#%s">%s %s</a></li>`, anchor(ri, si), verdictBadge(s.VerdictOf()), esc(s.Name))
		}
		b.WriteString("</ol></nav>\n")
		for si, s := range r.File.Scenarios {
			scenario(&b, s, anchor(ri, si))
		}
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// RenderCompare writes two runs side by side, scenario by scenario, with
// the comparison (regressions first) on top.
func RenderCompare(w io.Writer, base, nw Run, r *compare.Report) error {
	var b strings.Builder
	title := fmt.Sprintf("birdcage compare: %s → %s", base.Name, nw.Name)
	head(&b, title)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(title))
	cls := "ok"
	summary := fmt.Sprintf("%d scenarios compared, no regression", len(r.Scenarios))
	if r.Regressions > 0 {
		cls = "regression"
		summary = fmt.Sprintf("%d scenarios compared, %d REGRESSED", len(r.Scenarios), r.Regressions)
	}
	fmt.Fprintf(&b, `<p class="summary %s">%s (thresholds: %s)</p>`, cls, esc(summary), esc(r.Thresholds.String()))
	for _, e := range r.EnvDiffers {
		fmt.Fprintf(&b, `<p class="warn">The runs differ in %s: figures may not be comparable.</p>`, esc(e))
	}
	if len(r.OnlyInBase)+len(r.OnlyInNew) > 0 {
		b.WriteString("<ul class=\"onesided\">")
		for _, n := range r.OnlyInBase {
			fmt.Fprintf(&b, "<li>only in BASE: %s</li>", esc(n))
		}
		for _, n := range r.OnlyInNew {
			fmt.Fprintf(&b, "<li>only in NEW: %s</li>", esc(n))
		}
		b.WriteString("</ul>")
	}
	legend(&b)
	b.WriteString(`<div class="sides"><div>`)
	runHeader(&b, base)
	b.WriteString(`</div><div>`)
	runHeader(&b, nw)
	b.WriteString(`</div></div>`)
	for i, d := range r.Scenarios {
		mark := `<span class="badge pass">ok</span>`
		switch {
		case d.Regression:
			mark = `<span class="badge fail">REGRESSION</span>`
		case len(d.Undecided) > 0:
			mark = `<span class="badge skip">not enough samples</span>`
		}
		fmt.Fprintf(&b, `<section class="pair" id="pair-%d"><h2>%s %s</h2>`, i, mark, esc(d.Name))
		if len(d.Reasons) > 0 {
			b.WriteString(`<ul class="reasons">`)
			for _, why := range d.Reasons {
				fmt.Fprintf(&b, "<li>%s</li>", esc(why))
			}
			b.WriteString("</ul>")
		}
		if len(d.Undecided) > 0 && !d.Regression {
			b.WriteString(`<ul class="reasons">`)
			for _, why := range d.Undecided {
				fmt.Fprintf(&b, "<li>%s</li>", esc(why))
			}
			b.WriteString("</ul>")
		}
		if len(d.BaseRuns)+len(d.NewRuns) > 0 {
			fmt.Fprintf(&b, `<p class="note">Repeated: %d runs in BASE, %d in NEW. The table gives medians [min–max] and the one-sided Mann–Whitney p; a gated figure (%s) regresses when NEW's median is worse by more than its minimum effect and its p, Holm-adjusted over the scenario's gated figures, is below α %g; the others are informational. Below, each side's first run.</p>`, len(d.BaseRuns), len(d.NewRuns), html.EscapeString(strings.Join(r.Gated, ", ")), r.Alpha)
		}
		compareTable(&b, d)
		bs, ns := base.File.Scenarios[d.BaseIndex], nw.File.Scenarios[d.NewIndex]
		b.WriteString(`<div class="sides"><div>`)
		scenario(&b, bs, fmt.Sprintf("pair-%d-base", i))
		b.WriteString(`</div><div>`)
		scenario(&b, ns, fmt.Sprintf("pair-%d-new", i))
		b.WriteString("</div></div></section>\n")
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func compareTable(b *strings.Builder, d compare.ScenarioDiff) {
	b.WriteString(`<table class="figures"><tr><th>figure</th><th>base</th><th>new</th><th>delta</th><th>p</th><th></th></tr>`)
	for _, f := range d.Figures {
		row(b, f.Name, f)
	}
	for _, f := range d.Flows {
		row(b, "flow "+f.Flow+" "+f.Gap.Name, f.Gap)
		row(b, "flow "+f.Flow+" lost", f.Lost)
	}
	b.WriteString("</table>")
}

func row(b *strings.Builder, name string, f compare.FigureDiff) {
	cls, mark := "", ""
	switch {
	case f.Regression:
		cls, mark = ` class="regression"`, "REGRESSION"
	case f.Undecided:
		mark = "not enough samples"
	case f.Informational:
		mark = "~ worse (informational)"
	}
	p := ""
	if f.Tested {
		p = fmt.Sprintf("%.3g", f.P)
		if f.Gated {
			p += fmt.Sprintf(" (adj %.3g)", f.AdjustedP)
		}
	}
	side := func(v float64, ok bool, st *results.Stats) string {
		if !ok {
			return "–"
		}
		if st != nil && st.N > 1 {
			return fmt.Sprintf("%s [%s–%s]", num(st.Median), num(st.Min), num(st.Max))
		}
		return num(v)
	}
	delta := ""
	if f.HasBase && f.HasNew {
		delta = num(f.Delta)
		if f.Delta > 0 {
			delta = "+" + delta
		}
	}
	fmt.Fprintf(b, "<tr%s><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>", cls, esc(name), side(f.Base, f.HasBase, f.BaseStats), side(f.New, f.HasNew, f.NewStats), delta, p, mark)
}

func anchor(run, scen int) string { return fmt.Sprintf("s%d-%d", run, scen) }

func runHeader(b *strings.Builder, r Run) {
	f := r.File
	counts := map[results.Verdict]int{}
	for _, s := range f.Scenarios {
		counts[s.VerdictOf()]++
	}
	fmt.Fprintf(b, `<section class="run"><h2>Run %s</h2><table class="meta">`, esc(r.Name))
	meta := [][2]string{
		{"started", f.Started.UTC().Format("2006-01-02 15:04:05 UTC")},
		{"kernel", f.Kernel},
		{"environment", f.Env.String()},
		{"scenarios", fmt.Sprintf("%d: %d passed, %d failed, %d skipped", len(f.Scenarios), counts[results.VerdictPass], counts[results.VerdictFail], counts[results.VerdictSkip])},
	}
	if f.Env != nil {
		where := f.Env.Where
		if f.Env.VMAccel != "" {
			where += ", accelerator " + f.Env.VMAccel
		}
		meta = append(meta, [2]string{"native or VM", where}, [2]string{"probe rate", fmt.Sprintf("%d per second per flow", f.Env.ProbeRate)},
			[2]string{"BIRD", f.Env.BIRDVersion})
	}
	for _, m := range meta {
		fmt.Fprintf(b, "<tr><th>%s</th><td>%s</td></tr>", esc(m[0]), esc(m[1]))
	}
	b.WriteString("</table></section>\n")
}

func verdictBadge(v results.Verdict) string {
	return fmt.Sprintf(`<span class="badge %s">%s</span>`, v, strings.ToUpper(string(v)))
}

func scenario(b *strings.Builder, s results.ScenarioResult, id string) {
	if s.Name == "" {
		b.WriteString(`<p class="absent">not in this run</p>`)
		return
	}
	fmt.Fprintf(b, `<section class="scenario" id="%s" data-scenario="%s"><h3>%s %s</h3>`, id, esc(s.Name), verdictBadge(s.VerdictOf()), esc(s.Name))
	var meta []string
	meta = append(meta, "topology "+s.Topology, fmt.Sprintf("%.1f s", s.Duration))
	if len(s.Labels) > 0 {
		meta = append(meta, "labels "+strings.Join(s.Labels, ", "))
	}
	if s.Probes != nil {
		rt := "normal priority"
		if s.Probes.SenderRealtime {
			rt = "SCHED_FIFO"
		}
		meta = append(meta, fmt.Sprintf("probes %d/s per flow (sender %s)", s.Probes.Rate, rt))
	}
	fmt.Fprintf(b, `<p class="meta">%s</p>`, esc(strings.Join(meta, " · ")))
	if s.Spec != "" && s.Spec != s.Name {
		fmt.Fprintf(b, `<p class="meta">spec: %s</p>`, esc(s.Spec))
	}
	if s.Timing != nil {
		fmt.Fprintf(b, `<p class="meta">timing model: %s</p>`, esc(s.Timing.String()))
	}
	if s.VerdictOf() != results.VerdictPass {
		what := "reason"
		if s.VerdictOf() == results.VerdictFail {
			what = "failure"
		}
		msg := strings.TrimSpace(s.Failure)
		if msg == "" {
			msg = "(none recorded)"
		}
		fmt.Fprintf(b, `<div class="failure"><b>%s</b><pre>%s</pre>`, what, esc(msg))
		if s.FailureLocation != "" {
			fmt.Fprintf(b, `<p>at %s</p>`, esc(s.FailureLocation))
		}
		b.WriteString("</div>")
	}
	if !s.Registered && s.Verdict != "" {
		b.WriteString(`<p class="warn">The spec ended before registering its figures.</p>`)
	}
	if svg := chartSVG(s, id+"-chart"); svg != "" {
		b.WriteString(`<div class="chartwrap">` + svg + `</div>`)
		eventLegend(b, s)
	}
	figures(b, s)
	if s.Probes != nil {
		flowTable(b, s)
	}
	if len(s.Captures) > 0 {
		captureLinks(b, s)
	}
	if s.Sweep != nil {
		fmt.Fprintf(b, `<h4>Sweep over %s</h4><pre class="sweep">%s</pre>`, esc(s.Sweep.Knob), esc(s.Sweep.Table(s.Sweep.Fitted)))
	}
	if len(s.Restarts) > 0 {
		restarts(b, s)
	}
	for _, n := range s.Notes {
		fmt.Fprintf(b, `<p class="note">note: %s</p>`, esc(n))
	}
	b.WriteString("</section>\n")
}

func eventLegend(b *strings.Builder, s results.ScenarioResult) {
	w, _ := scenarioWindow(s)
	if len(s.Events) == 0 {
		return
	}
	b.WriteString(`<ol class="events">`)
	for _, e := range s.Events {
		t := fmtMs(w.ms(e.Mono))
		if !strings.HasPrefix(t, "-") {
			t = "+" + t
		}
		fmt.Fprintf(b, `<li><span class="t">%s ms</span> %s</li>`, t, esc(e.Name))
	}
	b.WriteString("</ol>")
}

func figures(b *strings.Builder, s results.ScenarioResult) {
	if len(s.Figures) == 0 && len(s.Samples) == 0 {
		return
	}
	b.WriteString(`<h4>Figures</h4><table class="figures"><tr><th>figure</th><th>value</th><th>distribution (min · median · p95 · max, n)</th><th></th></tr>`)
	for _, k := range results.AddFigureNames(results.AddFigureNames(nil, s.Figures), s.Samples).Sorted() {
		v, ok := s.Figures[k]
		val := "–"
		if ok {
			val = num(v)
		}
		dist, plot := "", ""
		if st, ok := s.Samples[k]; ok && st.N > 0 {
			dist = fmt.Sprintf("%.1f · %.1f · %.1f · %.1f (n=%d)", st.Min, st.Median, st.P95, st.Max, st.N)
			plot = distSVG(st)
		}
		fmt.Fprintf(b, `<tr data-figure="%s"><td>%s</td><td class="num">%s</td><td>%s</td><td>%s</td></tr>`, esc(k), esc(k), val, dist, plot)
	}
	b.WriteString("</table>")
}

// distSVG draws a distribution: the min–max line, the median–p95 box, and
// every sample as a dot.
func distSVG(st results.Stats) string {
	const w, h = 220.0, 18.0
	span := st.Max - st.Min
	x := func(v float64) float64 {
		if span == 0 {
			return w / 2
		}
		return 6 + (v-st.Min)/span*(w-12)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="dist" viewBox="0 0 %g %g" width="%g" height="%g" xmlns="http://www.w3.org/2000/svg" data-n="%d">`, w, h, w, h, st.N)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="9" x2="%.1f" y2="9" class="range"/>`, x(st.Min), x(st.Max))
	fmt.Fprintf(&b, `<rect x="%.1f" y="4" width="%.1f" height="10" class="box"/>`, x(st.Median), max(x(st.P95)-x(st.Median), 1))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="2" x2="%.1f" y2="16" class="median"/>`, x(st.Median), x(st.Median))
	for _, v := range st.Samples {
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="9" r="2" class="sample"><title>%g</title></circle>`, x(v), v)
	}
	b.WriteString("</svg>")
	return b.String()
}

func flowTable(b *strings.Builder, s results.ScenarioResult) {
	rep := s.Probes
	b.WriteString(`<h4>Probe flows</h4><table class="flows"><tr><th>flow</th><th>sent</th><th>received</th><th>lost</th><th>disruptions</th><th>longest gap ms</th><th>sender pause in it ms</th><th>gap began</th></tr>`)
	for _, f := range flowsOf(s) {
		g := f.g
		began := "–"
		if g.Gap.Mark != "" && g.Lost > 0 {
			began = fmt.Sprintf("%+.1f ms after %s", g.Gap.SinceMarkMs, g.Gap.Mark)
		}
		dis := "–"
		if g.Delivery != nil {
			dis = fmt.Sprint(g.DisruptionCount)
		}
		cls := ""
		if g.Lost > 0 {
			cls = ` class="lossy"`
		}
		fmt.Fprintf(b, `<tr%s><td>%s</td><td class="num">%d</td><td class="num">%d</td><td class="num">%d</td><td class="num">%s</td><td class="num">%.1f</td><td class="num">%.1f</td><td>%s</td></tr>`,
			cls, esc(g.Flow), g.Sent, g.Received, g.Lost, dis, g.LongestGapMs, g.SenderPauseInGapMs, esc(began))
	}
	t := rep.Total
	fmt.Fprintf(b, `<tr class="total"><td>total (%d flows, %d with loss)</td><td class="num">%d</td><td class="num">%d</td><td class="num">%d</td><td></td><td class="num">%.1f</td><td class="num">%.1f</td><td>%s</td></tr></table>`,
		t.Flows, t.FlowsWithLoss, t.Sent, t.Received, t.Lost, t.LongestGapMs, t.SenderPauseInGapMs, esc(t.LongestGapFlow))
}

func legend(b *strings.Builder) {
	b.WriteString(`<p class="legend">Charts: one clock for everything (CLOCK_MONOTONIC, ms since the first probe). Flows: ` +
		`<span class="sw deliv-full"></span> all probes delivered <span class="sw deliv-part"></span> some lost ` +
		`<span class="sw deliv-none"></span> nothing delivered (a hole) <span class="sw lane-bg"></span> the sender sent nothing (a sender stall, not the network) <span class="sw gap"></span> longest gap (BPF). ` +
		`Route lanes (node, cluster prefix): <span class="sw own-programmer"></span> programmer ` +
		`<span class="sw own-bird"></span> BIRD <span class="sw own-other"></span> other protocol ` +
		`<span class="sw own-none"></span> no route. Numbered lines: harness events (listed under each chart).</p>` + "\n")
}

func head(b *strings.Builder, title string) {
	fmt.Fprintf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title>\n<style>%s</style></head><body>\n", esc(title), css)
}

const css = `
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:16px 24px;color:#1b1b1b;background:#fff}
h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:18px 0 6px}h3{font-size:16px;margin:0 0 4px}h4{font-size:14px;margin:10px 0 4px}
table{border-collapse:collapse;margin:4px 0 8px}th,td{border:1px solid #ddd;padding:2px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.lossy td{background:#fff4f0}tr.total td{font-weight:600}tr.regression td{background:#fde2e2;font-weight:600}
.badge{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-size:12px;font-weight:700;vertical-align:1px}
.badge.pass{background:#2e8b3e}.badge.fail{background:#c62828}.badge.skip{background:#888}
.scenario{border:1px solid #ccc;border-radius:6px;padding:10px 14px;margin:14px 0;background:#fcfcfc}
.meta{color:#555;margin:2px 0}.note{color:#7a5b00;margin:2px 0}.warn{color:#a04000;font-weight:600}
.failure{background:#fdecea;border-left:4px solid #c62828;padding:4px 10px;margin:6px 0}.failure pre{white-space:pre-wrap;margin:4px 0;font-size:12px}
.summary.ok{color:#2e8b3e;font-weight:700}.summary.regression{color:#c62828;font-weight:700;font-size:16px}
.legend{font-size:13px;color:#333}.sw{display:inline-block;width:14px;height:10px;border:1px solid #999;vertical-align:0}
.chartwrap{overflow-x:auto}svg.chart{width:100%;height:auto;max-width:1300px;display:block}
svg.chart text{font-size:11px;fill:#333}svg.chart .lane-label{text-anchor:end}svg.chart .tick{text-anchor:middle;fill:#666}
svg.chart .axis{fill:#666}svg.chart .grid{stroke:#e6e6e6;stroke-width:1}
.lane-bg{fill:#f2f2f2}.deliv-full{fill:#58b368}.deliv-part{fill:#e9c46a}.deliv-none{fill:#d62728}
.gap{fill:none;stroke:#111;stroke-width:1.5;stroke-dasharray:3 2}span.gap{background:#fff;border:2px dashed #111}
.own-programmer{fill:#2f6fdb;background:#2f6fdb}.own-bird{fill:#e08a1e;background:#e08a1e}.own-other{fill:#8a5fbf;background:#8a5fbf}.own-none{fill:#d62728;background:#d62728}
span.lane-bg{background:#f2f2f2}span.deliv-full{background:#58b368}span.deliv-part{background:#e9c46a}span.deliv-none{background:#d62728}
.event line{stroke:#222;stroke-width:1;stroke-dasharray:4 3}.event circle{fill:#222}svg.chart .event text{fill:#fff;font-size:10px;text-anchor:middle;font-weight:700}
ol.events{columns:2;font-size:12px;margin:4px 0 8px;color:#333}ol.events .t{display:inline-block;min-width:80px;color:#666;font-variant-numeric:tabular-nums}
svg.dist .range{stroke:#888}svg.dist .box{fill:#cfe0f7;stroke:#2f6fdb}svg.dist .median{stroke:#2f6fdb;stroke-width:2}svg.dist .sample{fill:#c62828;opacity:.7}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:12px}.sides>div{min-width:0;overflow-x:auto}.sides table{font-size:12px}
.pair{border-top:2px solid #999;margin-top:18px}.reasons li{color:#c62828;font-weight:600}
nav.toc ol{margin:4px 0 8px}pre.sweep{font-size:12px;background:#f7f7f7;padding:6px}
`

// num prints a figure for people: whole numbers from 1000 up, else four
// significant digits (901.0, 12.81, 0.9987).
func num(v float64) string {
	if math.Abs(v) >= 1000 || v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// restarts tabulates the programmer restarts on the chart's clock.
func restarts(b *strings.Builder, s results.ScenarioResult) {
	w, _ := scenarioWindow(s)
	after := func(t, from int64) string {
		if t == 0 {
			return "–"
		}
		return fmtMs(float64(t-from) / 1e6)
	}
	b.WriteString(`<h4>Programmer restarts</h4><table class="restarts"><tr><th>node</th><th>reason</th><th>exit code</th><th>exited at ms</th>` +
		`<th>restarted after ms</th><th>first programming pass after ms</th><th>first sync after ms</th><th>modelled startup delay ms</th></tr>`)
	nodes := make([]string, 0, len(s.Restarts))
	for n := range s.Restarts {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		for _, r := range s.Restarts[n] {
			fmt.Fprintf(b, `<tr data-restart="%s"><td>%s</td><td>%s</td><td class="num">%d</td><td class="num">%s</td><td class="num">%s</td><td class="num">%s</td><td class="num">%s</td><td class="num">%s</td></tr>`,
				esc(n), esc(n), esc(string(r.Reason)), r.ExitCode, fmtMs(w.ms(r.ExitMono)), after(r.StartMono, r.ExitMono), after(r.ProgrammedMono, r.ExitMono),
				after(r.SyncedMono, r.ExitMono), fmtMs(float64(r.StartupDelayNs)/1e6))
		}
	}
	b.WriteString("</table>")
}

// captureLinks lists the probe window's packet captures, linked by their
// path relative to the artifacts dir (where the report is written beside
// the results).
func captureLinks(b *strings.Builder, s results.ScenarioResult) {
	b.WriteString(`<h4>Packet captures (probe window)</h4><table class="captures"><tr><th>node</th><th>interface</th><th>file</th><th>probe packets</th><th>missed</th></tr>`)
	for _, c := range s.Captures {
		missed := "–"
		if c.KernelDrops+c.OverLimit > 0 {
			missed = fmt.Sprintf("%d dropped by the kernel, %d over the size limit", c.KernelDrops, c.OverLimit)
		}
		fmt.Fprintf(b, `<tr><td>%s</td><td>%s</td><td><a class="pcap" href="%s">%s</a></td><td class="num">%d</td><td>%s</td></tr>`,
			esc(c.Node), esc(c.Iface), esc(filepath.ToSlash(c.Path)), esc(filepath.Base(c.Path)), c.Packets, esc(missed))
	}
	b.WriteString("</table>")
}
