package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/report/results"
)

// UpgradeProgrammer is b, the programmer binary the headline upgrade's node
// runs from its upgrade on ($BIRDCAGE_UPGRADE_PROGRAMMER, `birdcage run
// --upgrade-programmer`: a team's new build judged by the headline claim,
// the run's own programmer running before it and on every other node), as
// an absolute path, "" when unset; an error names the variable and why the
// file cannot run.
func UpgradeProgrammer(b string) (string, error) {
	if b == "" {
		return "", nil
	}
	abs, err := filepath.Abs(b)
	if err != nil {
		return "", fmt.Errorf("%s=%s: %w", env.UpgradeProgrammer, b, err)
	}
	if err := CheckExecutable(abs); err != nil {
		return "", fmt.Errorf("%s: %w", env.UpgradeProgrammer, err)
	}
	return abs, nil
}

// binaryDigest is the first 12 hex digits of path's SHA-256, to tell two
// builds apart in the events ("" when it cannot be read).
func binaryDigest(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// programmerBinary returns the binary to run: b (Options.Programmer, a
// user's own binary keeping the process contract in dataplane/programmer),
// or cmd/birdcage-programmer built into the run's temp dir (go's build
// cache makes that a relink after the first time).
func programmerBinary(r *run.Run, b string) (string, error) {
	if b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", fmt.Errorf("%s=%s: %w", env.Programmer, b, err)
		}
		return abs, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("build the route programmer: %w (or set %s to a programmer binary)", err, env.Programmer)
	}
	dir, err := r.TempDir("programmer-build")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "birdcage-programmer")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/birdcage-programmer")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/birdcage-programmer: %v: %s (or set %s)", err, strings.TrimSpace(string(msg)), env.Programmer)
	}
	return out, nil
}

// moduleRoot finds birdcage's go.mod above the working directory.
func moduleRoot() (string, error) { return results.ModuleRoot() }
