package htmlreport

// Holds the handover report in place: rendered from a real run's results
// (testdata, recorded natively with the liveconfig && noencap && !sweep
// scenarios), every scenario is present, every flow's gap figure is
// printed, the charts carry their data (delivery per flow with its holes,
// route lanes per node, the events), nothing is fetched from anywhere, and
// a real browser renders it without a console error (a positive control
// proves the console check can see one).

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
)

// recorded is a real run's results file (see testdata/results/README.md at the root).
const (
	recorded        = "../../testdata/results/liveconfig-noencap.json"
	recordedUpgrade = "../../testdata/results/upgrade-ipip-vm.json"
)

func renderRecorded(t *testing.T) (*results.ResultsFile, string) {
	t.Helper()
	f, err := results.ReadResults(recorded)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, "birdcage handover report: "+filepath.Base(recorded), []Run{{Name: filepath.Base(recorded), File: f}}); err != nil {
		t.Fatal(err)
	}
	return f, b.String()
}

func TestReportContent(t *testing.T) {
	f, page := renderRecorded(t)
	// Guard: the recording is what the test claims to check.
	if len(f.Scenarios) < 2 {
		t.Fatalf("%s has %d scenarios; the recording should have the liveconfig noencap pair", recorded, len(f.Scenarios))
	}
	if f.Env == nil || f.Env.ProbeRate == 0 || f.Env.BIRDVersion == "" {
		t.Errorf("the recording lacks its environment: %+v", f.Env)
	}
	for _, want := range []string{"kernel", f.Kernel, "native or VM", "probe rate", "BIRD", "timing model"} {
		if !strings.Contains(page, esc(want)) {
			t.Errorf("page lacks run metadata %q", want)
		}
	}
	withLoss, lanes := 0, 0
	for _, s := range f.Scenarios {
		if !strings.Contains(page, fmt.Sprintf(`data-scenario="%s"`, esc(s.Name))) {
			t.Errorf("scenario %q missing from the page", s.Name)
		}
		if s.VerdictOf() == results.VerdictFail && !strings.Contains(page, esc(strings.TrimSpace(s.Failure))) {
			t.Errorf("scenario %q: failure message not shown", s.Name)
		}
		if g, ok := s.Figures["longestProbeGapMs"]; ok && !strings.Contains(page, ">"+num(g)+"<") {
			t.Errorf("scenario %q: figure longestProbeGapMs %s not printed", s.Name, num(g))
		}
		if s.Probes == nil {
			continue
		}
		for _, fl := range s.Probes.Flows {
			// The flow table prints each gap, the chart carries it as data.
			if !strings.Contains(page, fmt.Sprintf(`<td>%s</td>`, esc(fl.Flow))) ||
				!strings.Contains(page, fmt.Sprintf(`<td class="num">%.1f</td>`, fl.LongestGapMs)) {
				t.Errorf("scenario %q flow %s: longest gap %.1f ms not printed", s.Name, fl.Flow, fl.LongestGapMs)
			}
			chartFlow := fmt.Sprintf(`data-flow="%s" data-lost="%d" data-longest-gap-ms="%.1f" data-disruptions="%d"`, esc(fl.Flow), fl.Lost, fl.LongestGapMs, fl.DisruptionCount)
			if !strings.Contains(page, chartFlow) {
				t.Errorf("scenario %q flow %s: chart data missing (%s)", s.Name, fl.Flow, chartFlow)
			}
			if fl.Delivery == nil {
				t.Errorf("scenario %q flow %s: the recording has no delivery series", s.Name, fl.Flow)
			}
			if fl.Lost > 0 {
				withLoss++
			}
		}
		if len(s.RouteEvents) == 0 {
			t.Errorf("scenario %q: the recording has no route events", s.Name)
		}
		lanes += len(Lanes(s.RouteEvents, s.Probes.EndNs, kroute.Protocol(s.ProgrammerProtocol)))
	}
	// The handover loses probes somewhere: the holes must be drawn.
	if withLoss == 0 {
		t.Fatalf("no flow lost a probe in the recording: nothing shows that holes are drawn")
	}
	if n := strings.Count(page, `class="deliv-none"`); n == 0 {
		t.Errorf("flows lost probes but no hole is drawn")
	}
	if n := strings.Count(page, `class="route-lane"`); n != lanes || n == 0 {
		t.Errorf("%d route lanes drawn, want %d (one per node and cluster prefix)", n, lanes)
	}
	for _, owner := range []kroute.Owner{kroute.OwnerProgrammer, kroute.OwnerBIRD} {
		if !strings.Contains(page, fmt.Sprintf(`data-owner="%s"`, owner)) {
			t.Errorf("no lane span owned by %s: a live change between BIRD and the programmer shows both", owner)
		}
	}
	if !strings.Contains(page, `data-event="SetProgramClusterRoutes(`) {
		t.Errorf("the config change is not drawn as an event marker")
	}
	// Self-contained: nothing to fetch.
	if m := regexp.MustCompile(`(?i)(src=|href="(https?:)?//|url\(|@import|<script|<link)`).FindString(page); m != "" {
		t.Errorf("page would fetch or run something: %q", m)
	}
}

func TestMarkdown(t *testing.T) {
	f, err := results.ReadResults(recorded)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Markdown(&b, []Run{{Name: "native", File: f}}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, s := range f.Scenarios {
		if !strings.Contains(md, mdEsc(s.Name)) {
			t.Errorf("summary lacks %q", s.Name)
		}
		if s.Probes != nil && !strings.Contains(md, fmt.Sprintf("| %.1f |", s.Probes.Total.LongestGapMs)) {
			t.Errorf("summary lacks %q's longest gap %.1f", s.Name, s.Probes.Total.LongestGapMs)
		}
	}
}

// chromium runs headless Chromium on a page and returns its console lines.
func chromium(t *testing.T, bin, page, screenshot string) []string {
	t.Helper()
	ud := t.TempDir()
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir="+ud,
		"--screenshot="+screenshot, "--window-size=1400,2000", "--enable-logging=stderr", "--v=0", "file://"+page)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chromium on %s: %v\n%s", page, err, out)
	}
	var console []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, ":CONSOLE") {
			console = append(console, l)
		}
	}
	if st, err := os.Stat(screenshot); err != nil || st.Size() == 0 {
		t.Fatalf("chromium wrote no screenshot %s (%v):\n%s", screenshot, err, out)
	}
	return console
}

func TestReportInChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		testenv.Missing(t, "chromium", "headless Chromium renders the report (Debian package chromium)")
	}
	dir := t.TempDir()
	// Positive control: the console check sees a page's console error.
	ctl := filepath.Join(dir, "control.html")
	if err := os.WriteFile(ctl, []byte(`<!DOCTYPE html><html><body><script>console.error("birdcage-console-control")</script></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	if lines := chromium(t, bin, ctl, filepath.Join(dir, "control.png")); len(lines) == 0 || !strings.Contains(strings.Join(lines, "\n"), "birdcage-console-control") {
		t.Fatalf("the console check did not see the control page's console.error: %q", lines)
	}
	art := results.ArtifactsDir(testenv.Env().Artifacts)
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	// The liveconfig recording, and the upgrade handover recorded in the VM.
	for name, path := range map[string]string{"liveconfig-noencap": recorded, "upgrade-ipip-vm": recordedUpgrade} {
		f, err := results.ReadResults(path)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := Render(&b, "birdcage handover report: "+filepath.Base(path), []Run{{Name: filepath.Base(path), File: f}}); err != nil {
			t.Fatal(err)
		}
		html := filepath.Join(art, "report-"+name+".html")
		if err := os.WriteFile(html, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		shot := filepath.Join(art, "report-"+name+".png")
		if lines := chromium(t, bin, html, shot); len(lines) > 0 {
			t.Errorf("console messages while rendering %s:\n%s", html, strings.Join(lines, "\n"))
		}
		t.Logf("report %s, screenshot %s", html, shot)
	}
}

// A scenario's packet captures are linked by their path relative to the
// artifacts dir, one row per node and interface, with what was missed.
func TestCaptureLinks(t *testing.T) {
	f := &results.ResultsFile{Scenarios: []results.ScenarioResult{{Name: "s", Verdict: results.VerdictPass, Passed: true,
		Captures: []results.CaptureFile{
			{Node: "node-1", Iface: "eth0", Path: "spec/pcap-abc123/node-1-eth0.pcap"},
			{Node: "node-2", Iface: "tunl0", Path: "spec/pcap-abc123/node-2-tunl0.pcap"},
		}}}}
	f.Scenarios[0].Captures[0].Packets = 1200
	f.Scenarios[0].Captures[1].KernelDrops = 3
	var b strings.Builder
	if err := Render(&b, "t", []Run{{Name: "r.json", File: f}}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		`<a class="pcap" href="spec/pcap-abc123/node-1-eth0.pcap">node-1-eth0.pcap</a></td><td class="num">1200</td>`,
		`href="spec/pcap-abc123/node-2-tunl0.pcap"`, "3 dropped by the kernel",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Control: a scenario without captures has no capture table.
	f.Scenarios[0].Captures = nil
	b.Reset()
	_ = Render(&b, "t", []Run{{Name: "r.json", File: f}})
	if strings.Contains(b.String(), "Packet captures") {
		t.Errorf("a scenario without captures shows a capture table")
	}
}
