package env

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// edges are the files that load the environment (LoadOS): a process's
// entry, or a test package's only way in. Everything else takes values.
var edges = []string{
	"scenarios/scenariotest/suite.go", // the scenario suite's setup
	"cmd/birdcage/env.go",             // the CLI's root command
	"cmd/birdcage-programmer/main.go", // the programmer's main
	"ci/soakrun/main.go",              // the soak tool's main
	"internal/testenv/testenv.go",     // test packages without another edge (testenv.Env)
	"topo/build_test.go",              // the copy of topo's test binary a test starts
}

// Only an edge loads the environment, and nothing reads a BIRDCAGE_
// variable with os.Getenv or os.LookupEnv (by a constant of this package,
// or a name bound to one): no judge, no harness code, no helper reads a
// setting invisible at its call.
func TestOnlyEdgesReadTheEnvironment(t *testing.T) {
	root := moduleRoot(t)
	self, _ := filepath.Abs(".")
	var loads []string
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" || path == self {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		l, b := scanFile(rel, path, fset, f)
		loads = append(loads, l...)
		bad = append(bad, b...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range edges {
		if !slices.Contains(loads, e) {
			t.Errorf("guard: edge %s does not call env.LoadOS (stale list, or the scan misses calls)", e)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d reads of the environment outside the edges:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// scanFile lists f's env.LoadOS calls (as rel) and its reads outside the
// edges.
func scanFile(rel, path string, fset *token.FileSet, f *ast.File) (loads, bad []string) {
	envName := importName(f, "github.com/birdcage/birdcage/internal/env")
	// Names bound to a knob's constant in this file (const x = env.Lab).
	bound := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, v := range vs.Values {
				if isSel(v, envName, "") && i < len(vs.Names) {
					bound[vs.Names[i].Name] = true
				}
			}
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		at := rel + ":" + strings.TrimPrefix(fset.Position(call.Pos()).String(), path+":")
		if isSel(call.Fun, envName, "LoadOS") {
			loads = append(loads, rel)
			if !slices.Contains(edges, rel) {
				bad = append(bad, at+": env.LoadOS outside the edges")
			}
		}
		if (isSel(call.Fun, "os", "Getenv") || isSel(call.Fun, "os", "LookupEnv")) && len(call.Args) == 1 {
			a := call.Args[0]
			if id, ok := a.(*ast.Ident); (ok && bound[id.Name]) || isSel(a, envName, "") {
				bad = append(bad, at+": reads a BIRDCAGE_ variable itself (take it from the edge's env.Config)")
			}
		}
		return true
	})
	return loads, bad
}

// importName is the name path is imported under in f ("" if not).
func importName(f *ast.File, path string) string {
	for _, im := range f.Imports {
		if strings.Trim(im.Path.Value, `"`) == path {
			if im.Name != nil {
				return im.Name.Name
			}
			return filepath.Base(path)
		}
	}
	return ""
}

// isSel says e is pkg.name (any name when name is "").
func isSel(e ast.Expr, pkg, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok || pkg == "" {
		return false
	}
	x, ok := s.X.(*ast.Ident)
	return ok && x.Name == pkg && (name == "" || s.Sel.Name == name)
}

// The scan's positive control: a load outside the edges and both ways of
// reading a knob directly are found; reading PATH is not.
func TestEdgeScanFindsReads(t *testing.T) {
	src := `package p
import (
	"os"
	"github.com/birdcage/birdcage/internal/env"
)
const lab = env.Lab
func f() {
	_, _ = env.LoadOS()
	_ = os.Getenv(env.Artifacts)
	_, _ = os.LookupEnv(lab)
	_ = os.Getenv("PATH")
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	loads, bad := scanFile("harness/judge/p.go", "p.go", fset, f)
	if len(loads) != 1 || len(bad) != 3 {
		t.Fatalf("scan of a file with one load and two knob reads outside the edges: loads %q, findings %q; want 1 and 3", loads, bad)
	}
}
