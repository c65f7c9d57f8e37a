package results

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFigureKindValid(t *testing.T) {
	for _, k := range FigureKinds {
		if !k.Valid() {
			t.Errorf("%q is listed but not valid", k)
		}
	}
	if FigureKind("").Valid() || FigureKind("other").Valid() {
		t.Error(`"" and "other" must not be valid kinds`)
	}
}

// A figure carries the kind it was recorded with; AddFigure sums, and
// MaxFigure keeps the larger value, each keeping the kind.
func TestFigureRecordsItsKind(t *testing.T) {
	var s ScenarioResult
	s.Figure("windowMs", 3, KindDuration)
	s.AddFigure("lostIn", 2, KindLoss)
	s.AddFigure("lostIn", 5, KindLoss)
	s.MaxFigure("longestMs", 7, KindGap)
	s.MaxFigure("longestMs", 4, KindGap)
	s.MaxFigure("longestMs", 9, KindGap)
	for name, want := range map[string]struct {
		v float64
		k FigureKind
	}{"windowMs": {3, KindDuration}, "lostIn": {7, KindLoss}, "longestMs": {9, KindGap}} {
		if s.Figures[name] != want.v || s.FigureKinds[name] != want.k {
			t.Errorf("%s = %g (%q), want %g (%q)", name, s.Figures[name], s.FigureKinds[name], want.v, want.k)
		}
	}
	s.MarkUndeclaredFigures()
	if len(s.Notes) != 0 {
		t.Errorf("figures recorded with kinds got notes %q", s.Notes)
	}
}

// A kind outside FigureKinds is a bug in the spec: it panics, naming the
// figure and the valid kinds.
func TestFigureRefusesAnInvalidKind(t *testing.T) {
	defer func() {
		r := recover()
		msg, _ := r.(string)
		if !strings.Contains(msg, "windowMs") || !strings.Contains(msg, string(KindGap)) {
			t.Errorf("recovered %v, want a message naming the figure and the valid kinds", r)
		}
	}()
	var s ScenarioResult
	s.Figure("windowMs", 3, "ms")
}

// A figure written into the map by hand gets "" and one note, however
// often the row is marked; a recorded one keeps its kind.
func TestMarkUndeclaredFigures(t *testing.T) {
	s := ScenarioResult{Name: "x", Figures: map[string]float64{"someNewFigure": 1}}
	s.Figure("windowMs", 3, KindDuration)
	s.MarkUndeclaredFigures()
	s.MarkUndeclaredFigures()
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

// Figures are written only through the recorders: outside this package
// (and report's own tests) no code assigns into a row's Figures map (`x.Figures[k] = v`, `+=`, `++`),
// so every figure the suite writes carries a kind by construction. The
// guard: the scan finds the recorder calls, and this package's own writes.
func TestFiguresAreWrittenOnlyThroughRecorders(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Skip(err)
	}
	calls, ownWrites := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "artifacts" || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		// This package writes the map; report's own tests build raw rows
		// (a figure without a kind, a file from before kinds) on purpose.
		inResults := filepath.Dir(path) == filepath.Join(root, "report", "results") ||
			(strings.HasPrefix(path, filepath.Join(root, "report")+string(filepath.Separator)) && strings.HasSuffix(path, "_test.go"))
		write := func(e ast.Expr, at token.Pos) {
			ix, ok := e.(*ast.IndexExpr)
			if !ok {
				return
			}
			if sel, ok := ix.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Figures" {
				if inResults {
					ownWrites++
					return
				}
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d writes into Figures directly: record it with Figure, AddFigure or MaxFigure and its kind", rel, fset.Position(at).Line)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.AssignStmt:
				for _, l := range x.Lhs {
					write(l, x.Pos())
				}
			case *ast.IncDecStmt:
				write(x.X, x.Pos())
			case *ast.KeyValueExpr:
				// ScenarioResult{Figures: map[string]float64{"x": v}}: figures
				// without kinds (an empty map is only storage).
				if k, ok := x.Key.(*ast.Ident); ok && k.Name == "Figures" && !inResults {
					if m, ok := x.Value.(*ast.CompositeLit); ok && len(m.Elts) > 0 {
						rel, _ := filepath.Rel(root, path)
						t.Errorf("%s:%d fills Figures in a literal: record each with Figure and its kind", rel, fset.Position(x.Pos()).Line)
					}
				}
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && !inResults {
					switch sel.Sel.Name {
					case "Figure", "AddFigure", "MaxFigure":
						calls++
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 200 || ownWrites == 0 {
		t.Errorf("found %d recorder calls and %d writes in report/results: is the scan looking in the right place?", calls, ownWrites)
	}
}

// The kinds a row was recorded with survive the results file, and a
// figure written by hand is marked there.
func TestWrittenRowsCarryFigureKinds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	r, err := OpenResultsJoin(path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	row := ScenarioResult{Name: "a", Verdict: VerdictPass, Passed: true, Figures: map[string]float64{"byHand": 1}}
	row.Figure("deletesOfRemoteBlocks", 0, KindCount)
	row.Figure("windowMs", 12, KindDuration)
	if err := r.Add(row); err != nil {
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
	if k, ok := got["byHand"]; !ok || k != "" {
		t.Errorf("a figure written by hand: kind %q, %v; want \"\", true", k, ok)
	}
}
