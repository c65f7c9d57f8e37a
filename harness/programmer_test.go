package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/env"
)

// $BIRDCAGE_UPGRADE_PROGRAMMER: unset is no new build; a file that cannot
// run is an error naming the variable, before any cluster starts.
func TestUpgradeProgrammerEnv(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "new-build")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := UpgradeProgrammer(""); p != "" || err != nil {
		t.Errorf("unset: %q, %v; want neither", p, err)
	}
	if p, err := UpgradeProgrammer(exe); p != exe || err != nil {
		t.Errorf("%s=%s: %q, %v", env.UpgradeProgrammer, exe, p, err)
	}
	if d := binaryDigest(exe); len(d) != 12 {
		t.Errorf("digest of %s: %q, want 12 hex digits", exe, d)
	}
	if _, err := UpgradeProgrammer(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), env.UpgradeProgrammer) {
		t.Errorf("missing file: error %v, want one naming %s", err, env.UpgradeProgrammer)
	}
}
