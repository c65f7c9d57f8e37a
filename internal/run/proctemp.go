package run

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Temp files of processes that have no run of their own (a BIRD config
// check, a CI tool) carry their process's pid in their name,
// "birdcage-pid<PID>-<what>-…", so that Clean can remove what such a
// process left when it was killed, once it is gone.

// ProcessTempPattern is the os.CreateTemp / os.MkdirTemp pattern for this
// process's temp file or dir named what; append a suffix such as "*.conf"
// for a file.
func ProcessTempPattern(what string) string {
	return fmt.Sprintf("birdcage-pid%d-%s-", os.Getpid(), what)
}

// processTempOwner is the pid in a ProcessTempPattern name.
func processTempOwner(path string) (int, bool) {
	rest, ok := strings.CutPrefix(filepath.Base(path), "birdcage-pid")
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(digits)
	if !ok || err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// staleProcessTemps are the process temp files and dirs in the temp dir
// whose process is gone.
func staleProcessTemps() []string {
	tmps, _ := filepath.Glob(filepath.Join(os.TempDir(), "birdcage-pid*"))
	var out []string
	for _, t := range tmps {
		if pid, ok := processTempOwner(t); ok && syscall.Kill(pid, 0) != nil {
			out = append(out, t)
		}
	}
	return out
}
