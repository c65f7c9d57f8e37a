package testlist

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("# comment\n\n./topo TestBuild/ipip\n  ./harness   TestX  \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	es, err := Read(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0] != (Entry{"./topo", "TestBuild/ipip"}) || es[1] != (Entry{"./harness", "TestX"}) {
		t.Errorf("entries %+v", es)
	}
	for _, bad := range []string{"topo TestX", "./topo BenchmarkX", "./topo TestX extra"} {
		p := filepath.Join(dir, "bad")
		if err := os.WriteFile(p, []byte("# ok\n"+bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(p); err == nil || !strings.Contains(err.Error(), p+":2:") || !strings.Contains(err.Error(), "./package TestName") {
			t.Errorf("%q: error %v, want one naming %s:2 and the form", bad, err, p)
		}
	}
}
