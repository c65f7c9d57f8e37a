package harness

// An upgrade can replace the programmer binary, not only its release: a
// team's own new build under the process contract runs from the upgrade on
// (its process's executable is the new file) and programs the node's
// routes; a path that is no executable is refused, naming the field, before
// anything is stopped.

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/calico/config"
)

func TestUpgradeReplacesTheProgrammerBinary(t *testing.T) {
	c := startOrSkip(t, "noencap", Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := c.Node("node-2")
	oldPid := n.Programmer.Pid()

	// Refused: nothing stops, the old programmer keeps running.
	if _, err := c.UpgradeNode(ctx, "node-2", config.R333, UpgradeOptions{Programmer: "/nonexistent/programmer"}); err == nil ||
		!strings.Contains(err.Error(), "field Programmer") {
		t.Fatalf("a missing binary: %v, want an error naming field Programmer", err)
	}
	if n.Programmer.Pid() != oldPid || !n.Programmer.Running() {
		t.Fatalf("a refused upgrade stopped the programmer (pid %d → %d)", oldPid, n.Programmer.Pid())
	}

	// The new build: a copy of the binary under another name.
	b, err := os.ReadFile(n.Programmer.Binary())
	if err != nil {
		t.Fatal(err)
	}
	newBuild := filepath.Join(t.TempDir(), "team-programmer-new")
	if err := os.WriteFile(newBuild, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpgradeNode(ctx, "node-2", config.R333, UpgradeOptions{Programmer: newBuild}); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(n.Programmer.Pid()), "exe"))
	if err != nil || exe != newBuild {
		t.Fatalf("after the upgrade node-2's programmer runs %q (%v), want %q", exe, err, newBuild)
	}
	if err := c.WaitConverged(ctx); err != nil {
		t.Fatalf("the new build did not converge: %v", err)
	}
}
