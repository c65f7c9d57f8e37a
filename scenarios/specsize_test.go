package scenarios_test

// A spec body reads as its claim: the guard in a BeforeEach or a named
// helper, the steps in By, the machinery elsewhere. These tests hold the
// package to it by measuring every It and DescribeTable body.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	maxSpecBody    = 100 // lines: no body longer
	medianSpecBody = 40  // lines: the median body no longer
)

// specBody is one It or DescribeTable body and its length in lines.
type specBody struct {
	Where string
	Lines int
}

func (b specBody) String() string { return fmt.Sprintf("%s (%d lines)", b.Where, b.Lines) }

// specBodies measures the function literals passed to It and DescribeTable
// in one parsed file.
func specBodies(fset *token.FileSet, f *ast.File) []specBody {
	var out []specBody
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		id, ok := call.Fun.(*ast.Ident)
		if !ok || (id.Name != "It" && id.Name != "DescribeTable") {
			return true
		}
		for _, a := range call.Args {
			if fl, ok := a.(*ast.FuncLit); ok {
				s, e := fset.Position(fl.Body.Lbrace), fset.Position(fl.Body.Rbrace)
				out = append(out, specBody{fmt.Sprintf("%s:%d", filepath.Base(s.Filename), s.Line), e.Line - s.Line - 1})
			}
		}
		return true
	})
	return out
}

func packageSpecBodies(t *testing.T) []specBody {
	t.Helper()
	paths, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var all []specBody
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, specBodies(fset, f)...)
	}
	return all
}

func median(bodies []specBody) int {
	ls := make([]int, len(bodies))
	for i, b := range bodies {
		ls[i] = b.Lines
	}
	slices.Sort(ls)
	return ls[len(ls)/2]
}

func TestSpecBodiesAreShort(t *testing.T) {
	bodies := packageSpecBodies(t)
	// Guard: the walk found the suite's specs, not a handful.
	if len(bodies) < 60 {
		t.Fatalf("found only %d spec bodies: the walk missed the suite", len(bodies))
	}
	for _, b := range bodies {
		if b.Lines > maxSpecBody {
			t.Errorf("%s: over %d lines; move the guard to a BeforeEach, the steps to By and named helpers", b, maxSpecBody)
		}
	}
	if m := median(bodies); m > medianSpecBody {
		t.Errorf("median spec body %d lines over %d bodies, want at most %d", m, len(bodies), medianSpecBody)
	}
	t.Logf("%d spec bodies, median %d lines", len(bodies), median(bodies))
}

// TestSpecBodyMeasureSeesALongBody is the control: a planted It of 101
// lines is measured as such, a DescribeTable body too.
func TestSpecBodyMeasureSeesALongBody(t *testing.T) {
	src := "package x\nvar _ = It(\"long\", func() {\n" + strings.Repeat("\tx()\n", 101) + "})\n" +
		"var _ = DescribeTable(\"t\", func(a int) {\n\tx()\n}, Entry(\"e\", 1))\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "planted_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := specBodies(fset, f)
	if len(got) != 2 || got[0].Lines != 101 || got[1].Lines != 1 {
		t.Fatalf("specBodies(planted) = %v, want the It at 101 lines and the table's body at 1", got)
	}
}
