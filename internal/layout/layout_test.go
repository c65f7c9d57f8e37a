package layout

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/birdcage/birdcage/"

// source is one non-test Go file of the tree: its room and the rooms it
// imports.
type source struct {
	path    string
	room    string
	imports map[string]string // imported package -> its room
	lines   int
}

func sources(t *testing.T) []source {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("layout: the module root %s has no go.mod: %v", root, err)
	}
	var out []source
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if base := d.Name(); rel != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "artifacts") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		s := source{path: rel, room: strings.Split(filepath.ToSlash(rel), "/")[0], imports: map[string]string{}, lines: countLines(t, p)}
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(ip, module) {
				s.imports[ip] = strings.Split(strings.TrimPrefix(ip, module), "/")[0]
			}
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func countLines(t *testing.T, p string) int {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
	}
	return n
}

// upward lists every import of a higher room, and every file in a room the
// ranking does not know.
func upward(srcs []source) []string {
	var bad []string
	for _, s := range srcs {
		from, ok := Rank[s.room]
		if !ok {
			bad = append(bad, s.path+": room "+s.room+" has no rank in internal/layout (add it, and a line in docs/layout.md)")
			continue
		}
		for ip, room := range s.imports {
			if to, ok := Rank[room]; !ok || to > from {
				bad = append(bad, s.path+" ("+s.room+") imports "+ip+" ("+room+", higher)")
			}
		}
	}
	sort.Strings(bad)
	return bad
}

func TestNoRoomImportsAHigherOne(t *testing.T) {
	srcs := sources(t)
	// Guard: the walk saw the tree, not an empty or partial one.
	rooms := map[string]bool{}
	for _, s := range srcs {
		rooms[s.room] = true
	}
	for r := range Rank {
		if r != "scenarios" && !rooms[r] {
			t.Errorf("layout: no non-test file found in room %s: the walk missed the tree", r)
		}
	}
	if len(srcs) < 200 {
		t.Fatalf("layout: only %d files walked", len(srcs))
	}
	for _, b := range upward(srcs) {
		t.Error(b)
	}
}

// TestUpwardImportIsCaught is the control: a planted file in dataplane that
// imports report, and one in a room with no rank, are both reported.
func TestUpwardImportIsCaught(t *testing.T) {
	planted := []source{
		{path: "dataplane/x/x.go", room: "dataplane", imports: map[string]string{module + "report/results": "report"}},
		{path: "report/y/y.go", room: "report", imports: map[string]string{module + "instrument/probe": "instrument"}},
		{path: "attic/z.go", room: "attic"},
	}
	got := upward(planted)
	if len(got) != 2 || !strings.Contains(got[0], "attic") || !strings.Contains(got[1], "dataplane/x/x.go (dataplane) imports "+module+"report/results") {
		t.Fatalf("upward(planted) = %q, want the attic room and dataplane → report", got)
	}
}

func TestNoRoomHoldsMoreThanItsShare(t *testing.T) {
	total, per := 0, map[string]int{}
	for _, s := range sources(t) {
		total += s.lines
		per[s.room] += s.lines
	}
	for room, n := range per {
		share := float64(n) / float64(total)
		t.Logf("%-10s %6d lines %5.1f%%", room, n, 100*share)
		if share > MaxShare {
			t.Errorf("room %s holds %.0f%% of the %d non-test lines (at most %.0f%%): split it by role", room, 100*share, total, 100*MaxShare)
		}
	}
}
