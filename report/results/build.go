package results

import (
	"os/exec"
	"strings"
)

// CurrentBuild is the build this run tests: named, when CI knows it better
// than the checkout does (a workflow's commit SHA, a release tag:
// $BIRDCAGE_BUILD, internal/env), else the commit of the birdcage checkout
// the working directory is in, with "-dirty" when it has changes; "" when
// neither is known. Shards of one run must agree on it (Merge).
func CurrentBuild(named string) string {
	if named != "" {
		return named
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
