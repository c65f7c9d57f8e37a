package scenarios_test

// Every wait in this package has a limit of its own. Gomega's Eventually and
// Consistently take the suite's default limit (SetDefaultEventuallyTimeout)
// only when they are not given a context: handed one, by WithContext or as
// their first argument, and no WithTimeout/Within, they wait until the
// context ends — the spec's or the suite's whole limit. A claim that breaks
// inside such a wait does not fail, it hangs, and in CI it becomes go test's
// panic, which names no claim. These tests read the package's source and
// fail on any such wait.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// unboundedWait is an Eventually or Consistently that waits on a context
// and sets no limit.
type unboundedWait struct {
	Pos  token.Position
	Wait string // Eventually or Consistently
}

func (w unboundedWait) String() string {
	return fmt.Sprintf("%s:%d: %s waits on a context with no WithTimeout/Within of its own", filepath.Base(w.Pos.Filename), w.Pos.Line, w.Wait)
}

// contextName is how this package names a context: ctx, a SpecContext
// parameter, or anything ending in ctx/Ctx (runCtx, specCtx).
var contextName = regexp.MustCompile(`(^|[a-z])(ctx|Ctx)$`)

// isContext reports whether e is (by this package's naming) a context:
// a name such as ctx, or a call into package context.
func isContext(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return contextName.MatchString(e.Name)
	case *ast.SelectorExpr:
		return contextName.MatchString(e.Sel.Name)
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "context" {
				return true
			}
		}
	}
	return false
}

// waitChain unwinds a chain such as Eventually(ctx, f).WithPolling(p).Should(m)
// from its outermost call: the root call (Eventually/Consistently, possibly
// qualified: gomega.Eventually, g.Eventually) and every method called on it.
func waitChain(call *ast.CallExpr) (root *ast.CallExpr, name string, methods []string, inner []*ast.CallExpr) {
	for {
		switch fun := call.Fun.(type) {
		case *ast.Ident:
			if fun.Name == "Eventually" || fun.Name == "Consistently" {
				return call, fun.Name, methods, inner
			}
			return nil, "", nil, nil
		case *ast.SelectorExpr:
			if fun.Sel.Name == "Eventually" || fun.Sel.Name == "Consistently" {
				if _, isCall := fun.X.(*ast.CallExpr); !isCall {
					return call, fun.Sel.Name, methods, inner
				}
			}
			next, ok := fun.X.(*ast.CallExpr)
			if !ok {
				return nil, "", nil, nil
			}
			methods = append(methods, fun.Sel.Name)
			inner = append(inner, next)
			call = next
		default:
			return nil, "", nil, nil
		}
	}
}

// findUnboundedWaits returns every wait in the files that waits on a context
// without a limit of its own.
func findUnboundedWaits(fset *token.FileSet, files []*ast.File) []unboundedWait {
	var found []unboundedWait
	for _, f := range files {
		seen := map[*ast.CallExpr]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || seen[call] {
				return true
			}
			root, name, methods, inner := waitChain(call)
			if root == nil {
				return true
			}
			for _, c := range inner {
				seen[c] = true
			}
			onContext, bounded := false, false
			for _, m := range methods {
				switch m {
				case "WithContext":
					onContext = true
				case "WithTimeout", "Within":
					bounded = true
				}
			}
			args := root.Args
			if len(args) > 0 && isContext(args[0]) {
				onContext = true
				args = args[1:]
			}
			// Eventually(actual, timeout[, polling]): a limit given by position.
			if len(args) > 1 {
				bounded = true
			}
			if onContext && !bounded {
				found = append(found, unboundedWait{Pos: fset.Position(root.Pos()), Wait: name})
			}
			return true
		})
	}
	return found
}

func parseGoFiles(t *testing.T, pattern string) (*token.FileSet, []*ast.File) {
	t.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go files match %s (err %v)", pattern, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", p, err)
		}
		files = append(files, f)
	}
	return fset, files
}

// TestEveryWaitHasALimit: no Eventually/Consistently in scenarios/ waits on a
// context without a limit of its own.
func TestEveryWaitHasALimit(t *testing.T) {
	fset, files := parseGoFiles(t, "*.go")
	// Guard: the scan sees this package's waits (there are some hundreds),
	// so "none unbounded" is not the scan seeing nothing.
	waits := 0
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if id, ok := call.Fun.(*ast.Ident); ok && (id.Name == "Eventually" || id.Name == "Consistently") {
					waits++
				}
			}
			return true
		})
	}
	if waits < 100 {
		t.Fatalf("guard: the scan found only %d waits in scenarios/; expected the package's hundreds", waits)
	}
	var lines []string
	for _, w := range findUnboundedWaits(fset, files) {
		lines = append(lines, w.String())
	}
	if len(lines) > 0 {
		t.Errorf("%d of %d waits wait on a context with no limit: a claim that breaks there hangs until the suite's limit instead of failing. Add WithTimeout(scenariotest.Machine.Wait(...)):\n%s",
			len(lines), waits, strings.Join(lines, "\n"))
	}
}

// TestUnboundedWaitControls: the scan reports each planted shape of an
// unbounded wait and none of the bounded ones, so TestEveryWaitHasALimit
// passing means something.
func TestUnboundedWaitControls(t *testing.T) {
	const src = `package p
func f() {
	Eventually(ctx, func() int { return 1 }).Should(Equal(1))                                     // unbounded: ctx first
	Eventually(func() int { return 1 }).WithContext(ctx).WithPolling(p).Should(Equal(1))           // unbounded: WithContext
	Consistently(specCtx, n).ShouldNot(HaveRoute())                                                 // unbounded: a SpecContext
	Eventually(context.Background(), n).Should(BeTrue())                                            // unbounded: a context call
	g.Eventually(n).WithContext(ctx).Should(BeTrue())                                               // unbounded: a Gomega instance
	Eventually(ctx, n).WithTimeout(d).Should(BeTrue())                                              // bounded
	Eventually(n).WithContext(ctx).Within(d).Should(BeTrue())                                       // bounded
	Eventually(ctx, n, d).Should(BeTrue())                                                          // bounded by position
	Eventually(n).WithPolling(p).Should(BeTrue())                                                   // the suite's default limit
	Eventually(func(ctx context.Context) bool { return ok(ctx) }).Should(BeTrue())                  // the default limit; ctx is the poll's own
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "planted.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	got := findUnboundedWaits(fset, []*ast.File{f})
	var lines []int
	for _, w := range got {
		lines = append(lines, w.Pos.Line)
	}
	want := []int{3, 4, 5, 6, 7}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Fatalf("planted waits reported on lines %v, want %v (the unbounded ones only)", lines, want)
	}
}
