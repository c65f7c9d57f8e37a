package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/env"
)

// --lab checks the manifest before the suite starts and narrows the filter
// to the lab specs.
func TestLabRun(t *testing.T) {
	if env, f, err := labRun("", "headline", false); err != nil || env != nil || f != "headline" {
		t.Errorf("no lab: %v %q %v", env, f, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\ncolour: blue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := labRun(bad, "", false); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "colour") {
		t.Errorf("bad manifest: %v, want an error naming the file and the field", err)
	}
	good, err := filepath.Abs("../../harness/lab/examples/kind-calico.yaml")
	if err != nil {
		t.Fatal(err)
	}
	vars, f, err := labRun(good, "headline", false)
	if err != nil || !slices.Contains(vars, env.Set(env.Lab, good)) || f != "lab" {
		t.Errorf("example manifest, default filter: %v %q %v", vars, f, err)
	}
	if _, f, _ := labRun("handmade", "noencap", true); f != "lab && (noencap)" {
		t.Errorf("handmade with a filter: %q", f)
	}
}
