package results

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every declared name and rule has one of the six kinds.
func TestFigureKindsTableIsValid(t *testing.T) {
	for name, k := range figureKinds {
		if !k.Valid() {
			t.Errorf("figure %q declared with kind %q, not one of %v", name, k, FigureKinds)
		}
		if strings.TrimSpace(name) != name || name == "" {
			t.Errorf("figure name %q has leading or trailing space", name)
		}
	}
	for _, r := range figureKindRules {
		if !r.Kind.Valid() {
			t.Errorf("rule %+v has kind %q, not one of %v", r, r.Kind, FigureKinds)
		}
		if r.Prefix == "" && r.Suffix == "" {
			t.Errorf("rule %+v matches every name", r)
		}
	}
	if FigureKind("").Valid() || FigureKind("other").Valid() {
		t.Error(`"" and "other" must not be valid kinds`)
	}
}

// Names the suite builds at run time find their kind through the rules
// and the qualifier rule; names nobody declared get none.
func TestKindOfFigure(t *testing.T) {
	for name, want := range map[string]FigureKind{
		"windowMs":                                                   KindDuration,
		"longestPeerNoRouteMs":                                       KindGap,
		"prefixesWithTwoRoutes":                                      KindCount,
		"deletesOfRemoteBlocks":                                      KindCount,
		"platformLostPerControlFlowMax":                              KindMachine,
		"senderPauseInGapMs":                                         KindMachine,
		"platformLostPerControlFlowMax.node-2":                       KindMachine,
		"node.node-2.lostOut":                                        KindLoss,
		"node.node-2.platformLostPerControlFlowMax":                  KindMachine,
		"spaced.longestNoRouteMs":                                    KindGap,
		"node-1.lastRouteFellBackMsAfterFailure":                     KindDuration,
		"SIGTERM noRouteWindowsNode2":                                KindCount,
		"SIGKILL recoveryToConvergedMs":                              KindDuration,
		"handovers: new owner first":                                 KindSize,
		"handovers: programmer deleted before BIRD was reconfigured": KindSize,
		"birdDeletesRefused node-3":                                  KindCount,
		"missing node-1->node-2":                                     KindLoss,
		"change2Switches":                                            KindCount,
		"change2LongestNoRouteMs":                                    KindGap,
		"warningsFromSwitchOn_node-1":                                KindCount,
		"warningsBIRDOwns_node-1":                                    KindSize,
		"upgradeLostOutboundUpgradedNode":                            KindLoss,
		"downgradeSeconds":                                           KindDuration,
	} {
		got, ok := KindOfFigure(name)
		if !ok || got != want {
			t.Errorf("KindOfFigure(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"someNewFigure", "node-1.someNewFigure", "change", "handovers: "} {
		if k, ok := KindOfFigure(name); ok {
			t.Errorf("KindOfFigure(%q) = %q, want undeclared", name, k)
		}
	}
}

// A row records every figure's kind; an undeclared figure gets "" and one
// note, however often the kinds are recorded.
func TestRecordFigureKinds(t *testing.T) {
	s := ScenarioResult{Name: "x", Figures: map[string]float64{"windowMs": 3, "someNewFigure": 1}}
	s.RecordFigureKinds()
	s.RecordFigureKinds()
	if s.FigureKinds["windowMs"] != KindDuration {
		t.Errorf("windowMs recorded as %q", s.FigureKinds["windowMs"])
	}
	if k, ok := s.FigureKinds["someNewFigure"]; !ok || k != "" {
		t.Errorf("undeclared figure recorded as %q, %v; want \"\", true", k, ok)
	}
	want := "figure someNewFigure has no declared kind: compare does not judge it"
	if len(s.Notes) != 1 || s.Notes[0] != want {
		t.Errorf("notes %q, want [%q]", s.Notes, want)
	}
}

// Every figure name the suite writes as a literal (Figures["…"] in
// scenarios/ and the harness root) is declared: a new figure without a
// kind fails here, not silently in compare.
func TestSuiteFigureNamesAreDeclared(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Skip(err)
	}
	lit := regexp.MustCompile(`Figures\["([^"]+)"\]`)
	seen := 0
	for _, dir := range []string{"scenarios", "harness", "harness/lab"} {
		files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
				seen++
				if _, ok := KindOfFigure(m[1]); !ok {
					t.Errorf("%s: figure %q has no declared kind (add it to figureKinds)", filepath.Base(f), m[1])
				}
			}
		}
	}
	if seen < 100 {
		t.Errorf("found only %d literal figure names: is the scan looking in the right place?", seen)
	}
}

// The writer records the kinds of every row it writes, so a row written by
// anything (the suite, `birdcage run`, a test) carries them.
func TestWrittenRowsCarryFigureKinds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	r, err := OpenResultsJoin(path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Add(ScenarioResult{Name: "a", Verdict: VerdictPass, Passed: true, Figures: map[string]float64{"deletesOfRemoteBlocks": 0, "windowMs": 12}}); err != nil {
		t.Fatal(err)
	}
	f, err := ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	got := f.Scenarios[0].FigureKinds
	if got["deletesOfRemoteBlocks"] != KindCount || got["windowMs"] != KindDuration {
		t.Errorf("written kinds %v", got)
	}
}
