// Package testlist reads a list of Go tests, one `./package TestName[/sub]`
// a line (blank lines and #-comments ignored): ci/vm/ipip-tests, which
// ci/vm/gotest turns into -test.run selections and ci/testsummary checks
// name by name. One reader, so the two cannot disagree on the format.
package testlist

import (
	"fmt"
	"os"
	"strings"
)

// Entry is one line: a package directory relative to the module root
// ("./topo") and a test name, possibly with a subtest ("TestX/sub").
type Entry struct {
	Package string
	Test    string
}

// Read reads the list at path; an error names the file, the line and the
// form a line must have.
func Read(path string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasPrefix(f[0], "./") || !strings.HasPrefix(f[1], "Test") {
			return nil, fmt.Errorf("%s:%d: want \"./package TestName[/subtest]\", got %q", path, i+1, line)
		}
		out = append(out, Entry{Package: f[0], Test: f[1]})
	}
	return out, nil
}
