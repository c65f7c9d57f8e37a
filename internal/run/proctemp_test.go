package run

// A temp file of a process with no run carries its pid, and Clean lists it
// for removal only once that process is gone.

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func TestProcessTempOwner(t *testing.T) {
	for name, want := range map[string]int{
		"birdcage-pid123-validate-999.conf": 123,
		"/tmp/birdcage-pid7-vmtests-1":      7,
		"birdcage-pidx-validate-1":          0,
		"birdcage-abc123-run-1":             0,
		"birdcage-pid-1":                    0,
	} {
		if got, _ := processTempOwner(name); got != want {
			t.Errorf("%s: owner %d, want %d", name, got, want)
		}
	}
}

func TestCleanListsTempsOfGoneProcesses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Clean reads " + StateRoot + " and the netns dir: run as root")
	}
	// A process that has exited: its pid is free (and not reused this soon).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(os.TempDir(), "birdcage-pid"+strconv.Itoa(cmd.Process.Pid)+"-validate-test.conf")
	if err := os.WriteFile(gone, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(gone)
	live, err := os.CreateTemp("", ProcessTempPattern("validate")+"*.conf")
	if err != nil {
		t.Fatal(err)
	}
	live.Close()
	defer os.Remove(live.Name())

	rep, err := Clean(CleanOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Dirs, gone) {
		t.Errorf("clean would not remove %s, left by a process that is gone: %v", gone, rep.Dirs)
	}
	if slices.Contains(rep.Dirs, live.Name()) {
		t.Errorf("clean would remove %s, this live process's", live.Name())
	}
	if _, err := os.Stat(gone); err != nil {
		t.Errorf("a dry run removed %s", gone)
	}
}
