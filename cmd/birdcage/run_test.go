package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/env"
)

// `birdcage run --programmer OLD --upgrade-programmer NEW`: both reach the
// suite as absolute paths; a missing or non-executable file, or NEW with a
// lab, fails before the suite starts, naming the flag.
func TestProgrammerRun(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "prog")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "notexec")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	vars, err := programmerRun(exe, exe, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{env.Set(env.Programmer, exe), env.Set(env.UpgradeProgrammer, exe)}
	if strings.Join(vars, " ") != strings.Join(want, " ") {
		t.Errorf("env = %v, want %v", vars, want)
	}
	if vars, err := programmerRun("", "", false); err != nil || len(vars) != 0 {
		t.Errorf("no flags: env %v, err %v; want neither", vars, err)
	}
	for _, c := range []struct {
		old, upgrade string
		lab          bool
		want         string
	}{
		{filepath.Join(dir, "missing"), "", false, "--programmer"},
		{"", plain, false, "--upgrade-programmer"},
		{"", dir, false, "not an executable file"},
		{"", exe, true, "--lab"},
	} {
		if _, err := programmerRun(c.old, c.upgrade, c.lab); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("programmerRun(%q, %q, lab %v): error %v, want one naming %q", c.old, c.upgrade, c.lab, err, c.want)
		}
	}
}
