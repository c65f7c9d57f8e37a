package run

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// hostSysctlsFile, in a run's state dir, records each host-wide sysctl the
// run changed (key, original value, value set), so Close and, after a
// crash, Clean can put it back.
const hostSysctlsFile = "host-sysctls"

// procSys is where sysctls live; tests point it at a directory of their own.
var procSys = "/proc/sys"

// SetHostSysctl changes a sysctl of the host (the init network namespace:
// the caller runs there) for the life of the run: the original value is
// recorded and restored when the run closes, or by Clean if the run was
// killed. It is restored only while it still holds the value this run set,
// so a second run that raised it further keeps its own. Only for limits
// the kernel keeps host-wide whatever the namespace (the neighbour table's
// gc thresholds), and only when the caller opted in.
func (r *Run) SetHostSysctl(key, value string) error {
	path := filepath.Join(procSys, strings.ReplaceAll(key, ".", "/"))
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("host sysctl %s: %w", key, err)
	}
	orig := strings.TrimSpace(string(old))
	f, err := os.OpenFile(filepath.Join(r.Dir, hostSysctlsFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("host sysctl %s: record: %w", key, err)
	}
	_, err = fmt.Fprintf(f, "%s\t%s\t%s\n", key, orig, value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("host sysctl %s: record: %w", key, err)
	}
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("host sysctl %s=%s: %w", key, value, err)
	}
	r.Defer("restore host sysctl "+key, func() error { return restoreSysctl(key, orig, value) })
	return nil
}

func restoreSysctl(key, orig, set string) error {
	path := filepath.Join(procSys, strings.ReplaceAll(key, ".", "/"))
	cur, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("restore host sysctl %s: %w", key, err)
	}
	if strings.TrimSpace(string(cur)) != set {
		return nil // changed since by someone else: theirs now
	}
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		return fmt.Errorf("restore host sysctl %s=%s: %w", key, orig, err)
	}
	return nil
}

// restoreHostSysctls puts back what a killed run's record says it changed.
func restoreHostSysctls(stateDir string) (restored []string, err error) {
	f, err := os.Open(filepath.Join(stateDir, hostSysctlsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p := strings.Split(sc.Text(), "\t"); len(p) == 3 {
			lines = append(lines, p)
		}
	}
	var errs []error
	for i := len(lines) - 1; i >= 0; i-- { // last change first, as Close would
		p := lines[i]
		if err := restoreSysctl(p[0], p[1], p[2]); err != nil {
			errs = append(errs, err)
		} else {
			restored = append(restored, p[0]+"="+p[1])
		}
	}
	return restored, errors.Join(errs...)
}
