package main

// Holds `birdcage run`'s output in place in both modes: on a terminal one
// status line rewritten in place (spec, elapsed time, probes sent / lost)
// and one permanent line per finished spec, the suite's noise kept out; off
// a terminal every suite line, with probe lines thinned to one per 10 s.

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/report/results"
)

var suiteLines = []string{
	"=== RUN   TestScenarios",
	"[birdcage] progress start Live change moves routes [noencap BIRD→programmer]",
	"[birdcage] progress probes sent=1000 lost=0 flows=6",
	"[birdcage] progress probes sent=7000 lost=12 flows=6",
	"[birdcage] == live change on noencap",
	"[birdcage] progress probes sent=13000 lost=30 flows=6",
	"[birdcage] spec passed     3.5s  Live change moves routes [noencap BIRD→programmer]",
	"--- PASS: TestScenarios (3.60s)",
}

// feed plays the lines one simulated second apart.
func feed(p *runProgress, clock *time.Time) {
	for _, l := range suiteLines {
		*clock = clock.Add(time.Second)
		p.line(l)
		p.tick()
	}
	p.finish()
}

func TestRunProgressTerminal(t *testing.T) {
	var out, log bytes.Buffer
	clock := time.Unix(0, 0)
	p := &runProgress{out: &out, log: &log, tty: true, now: func() time.Time { return clock }}
	feed(p, &clock)
	got := out.String()
	for _, want := range []string{
		"\r\x1b[Krunning Live change moves routes [noencap BIRD→programmer]  0s",
		"running Live change moves routes [noencap BIRD→programmer]  2s  probes sent 7000 lost 12",
		"\r\x1b[KPASSED     3.5s  Live change moves routes [noencap BIRD→programmer]\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, got)
		}
	}
	if strings.Contains(got, "=== RUN") || strings.Contains(got, "== live change") {
		t.Errorf("terminal output carries the suite's own lines:\n%q", got)
	}
	if !strings.Contains(log.String(), "=== RUN   TestScenarios") || strings.Count(log.String(), "\n") != len(suiteLines) {
		t.Errorf("the log should hold every suite line:\n%s", log.String())
	}
}

func TestRunProgressPlain(t *testing.T) {
	var out bytes.Buffer
	clock := time.Unix(0, 0)
	p := &runProgress{out: &out, tty: false, now: func() time.Time { return clock }}
	feed(p, &clock)
	got := out.String()
	if strings.Contains(got, "\r") || strings.Contains(got, "\x1b") {
		t.Errorf("plain output has terminal control characters:\n%q", got)
	}
	for _, want := range []string{"=== RUN   TestScenarios\n", "start Live change moves routes", "[birdcage] == live change on noencap\n", "[birdcage] spec passed     3.5s"} {
		if !strings.Contains(got, want) {
			t.Errorf("plain output lacks %q:\n%s", want, got)
		}
	}
	// Probe lines are thinned: none of the three came 10 s after the start.
	if strings.Contains(got, "probes sent") {
		t.Errorf("plain output should thin probe lines to one per 10 s:\n%s", got)
	}
	clock = clock.Add(11 * time.Second)
	p.spec = "x"
	p.line("[birdcage] progress probes sent=99 lost=1 flows=2")
	if !strings.Contains(out.String(), "x: ") || !strings.Contains(out.String(), "probes sent 99, lost 1 so far") {
		t.Errorf("a probe line 10 s on should print:\n%s", out.String())
	}
}

func TestRunSummary(t *testing.T) {
	var out bytes.Buffer
	runSummary(&out, &results.ResultsFile{Scenarios: []results.ScenarioResult{
		{Name: "live change", Verdict: results.VerdictPass, Duration: 3.5, Probes: &probe.Report{Total: probe.Total{Sent: 6000, Lost: 30, LongestGapMs: 31.2}}},
		{Name: "upgrade", Verdict: results.VerdictFail, Duration: 9},
	}})
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"scenario verdict lost longest gap ms duration s", "live change pass 30/6000 31.2 3.5", "upgrade fail - - 9.0"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// How to get into a kept cluster (--keep-on-fail) is shown in both modes,
// even on a terminal where the suite's own lines are not, and kept for the
// end of the run.
func TestRunProgressKeptCluster(t *testing.T) {
	lines := []string{
		"[birdcage] progress start Upgrade handover [noencap]",
		"[birdcage] kept: run 1a2b3c is kept up (topology noencap: nodes node-1, node-2, node-3)",
		"[birdcage] kept:   birdcage exec --run 1a2b3c node-1 -- ip route",
		"[birdcage] spec failed    4.0s  Upgrade handover [noencap]",
	}
	for _, tty := range []bool{true, false} {
		var out bytes.Buffer
		p := &runProgress{out: &out, tty: tty, now: time.Now}
		for _, l := range lines {
			p.line(l)
		}
		got := out.String()
		for _, want := range []string{"kept: run 1a2b3c is kept up", "kept:   birdcage exec --run 1a2b3c node-1 -- ip route\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("tty %v: output lacks %q:\n%q", tty, want, got)
			}
		}
		if len(p.kept) != 2 || !strings.HasPrefix(p.kept[1], "  birdcage exec") {
			t.Errorf("tty %v: kept %q, want the two lines for the end of the run", tty, p.kept)
		}
	}
}
