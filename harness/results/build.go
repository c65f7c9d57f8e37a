package results

import (
	"os"
	"os/exec"
	"strings"
)

// BuildEnv names the build a run tests (RunEnv.Build), for CI that knows
// it better than the checkout does (a workflow's commit SHA, a release
// tag). Unset: the checkout's commit, with "-dirty" when it has changes.
const BuildEnv = "BIRDCAGE_BUILD"

// CurrentBuild is the build this run tests: $BIRDCAGE_BUILD, else the
// commit of the birdcage checkout the working directory is in, "" when
// neither is known. Shards of one run must agree on it (Merge).
func CurrentBuild() string {
	if b := os.Getenv(BuildEnv); b != "" {
		return b
	}
	root, err := ModuleRoot()
	if err != nil {
		return ""
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	build := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		build += "-dirty"
	}
	return build
}
