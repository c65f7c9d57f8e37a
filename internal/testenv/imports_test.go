package testenv

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const importPath = "github.com/birdcage/birdcage/internal/testenv"

// importsTestenv reports whether the Go source src (a non-test file of the
// package in directory dir) imports this package where shipped code may
// not: only a test-helper package (its directory named *test, such as
// dataplane/bird/birdtest) may build on it.
func importsTestenv(dir, src string) (bool, error) {
	if strings.HasSuffix(filepath.Base(dir), "test") {
		return false, nil
	}
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, parser.ImportsOnly)
	if err != nil {
		return false, err
	}
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == importPath {
			return true, nil
		}
	}
	return false, nil
}

// Shipped code imports no test helper: this package skips and fails tests,
// reads the environment for them and builds fixtures, none of which a
// binary of birdcage's should carry.
func TestShippedCodeImportsNoTestHelper(t *testing.T) {
	// Control: a shipped file that imports the package is caught, the same
	// file in a test-helper package is not.
	planted := "package bird\n\nimport \"" + importPath + "\"\n"
	if bad, err := importsTestenv("dataplane/bird", planted); err != nil || !bad {
		t.Fatalf("control: a shipped import of testenv went unseen (%v)", err)
	}
	if bad, _ := importsTestenv("dataplane/bird/birdtest", planted); bad {
		t.Fatal("control: a test-helper package was refused")
	}
	root := filepath.Join("..", "..")
	var offenders []string
	files := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" || n == "node_modules" || (strings.HasPrefix(n, ".") && p != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || filepath.Dir(p) == "." {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		bad, err := importsTestenv(filepath.Dir(p), string(b))
		if err != nil {
			return err
		}
		if bad {
			offenders = append(offenders, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("guard: read %d non-test Go files; expected the module's hundreds", files)
	}
	if len(offenders) > 0 {
		t.Errorf("shipped code imports the test helper %s (move the helper into a *test package, as dataplane/bird/birdtest):\n  %s",
			importPath, strings.Join(offenders, "\n  "))
	}
}
