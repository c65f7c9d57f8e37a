package env

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// birdcageLiteral is a BIRDCAGE_ variable's name inside a Go string.
var birdcageLiteral = regexp.MustCompile(`BIRDCAGE_[A-Z]`)

// No Go file outside this package, test or not, spells a variable's name in
// a string: names come from the constants here, so every knob is in
// docs/knobs.md and a rename reaches every reader and every child process's
// environment.
func TestNoVariableNameLiteralOutsideEnv(t *testing.T) {
	root := moduleRoot(t)
	self, _ := filepath.Abs(".")
	var files int
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" || path == self || n == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && birdcageLiteral.MatchString(lit.Value) {
				rel, _ := filepath.Rel(root, path)
				bad = append(bad, rel+":"+strings.TrimPrefix(fset.Position(lit.Pos()).String(), path+":")+": "+lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("guard: scanned %d Go files under %s, want the whole module", files, root)
	}
	if len(bad) > 0 {
		t.Errorf("%d string literals name a BIRDCAGE_ variable outside internal/env (use its constant, env.Set for a child's environment):\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// The scan's positive control: the literal it looks for is found in a
// string and not in a comment.
func TestLiteralScanFindsOne(t *testing.T) {
	src := "package p\n// BIRDCAGE_IN_A_COMMENT\nvar x = \"BIRDCAGE_TUNNEL=kernel\"\n"
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	ast.Inspect(f, func(x ast.Node) bool {
		if lit, ok := x.(*ast.BasicLit); ok && birdcageLiteral.MatchString(lit.Value) {
			n++
		}
		return true
	})
	if n != 1 {
		t.Fatalf("the scan found %d literals in a file with one (and one comment), want 1", n)
	}
}
