package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/birdcage/birdcage/harness/results"
	"github.com/birdcage/birdcage/internal/run"
)

// ProgrammerEnv names a route programmer binary to use instead of building
// cmd/birdcage-programmer; it must keep the process contract documented in
// dataplane/programmer.
const ProgrammerEnv = "BIRDCAGE_PROGRAMMER"

// programmerBinary returns the binary to run: $BIRDCAGE_PROGRAMMER, or
// cmd/birdcage-programmer built into the run's temp dir (go's build cache
// makes that a relink after the first time).
func programmerBinary(r *run.Run) (string, error) {
	if b := os.Getenv(ProgrammerEnv); b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", fmt.Errorf("%s=%s: %w", ProgrammerEnv, b, err)
		}
		return abs, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("build the route programmer: %w (or set %s to a programmer binary)", err, ProgrammerEnv)
	}
	dir, err := r.TempDir("programmer-build")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "birdcage-programmer")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/birdcage-programmer")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/birdcage-programmer: %v: %s (or set %s)", err, strings.TrimSpace(string(b)), ProgrammerEnv)
	}
	return out, nil
}

// moduleRoot finds birdcage's go.mod above the working directory.
func moduleRoot() (string, error) { return results.ModuleRoot() }
