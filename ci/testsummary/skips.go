package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// SkipList is a stage's declared skips: the only skips it accepts. A line is
//
//	STAGE REGEXP  # why this skip is expected here
//
// STAGE is a -where name (native, vm, demo) or * for every stage; REGEXP
// matches the skip's description, "pkg TestName: reason" for a Go test or
// "spec FULL TEXT: reason" for a Ginkgo spec that skipped in its body. The
// comment is required: an expected skip says why it is expected.
type SkipList struct {
	Path    string
	entries []skipEntry
}

type skipEntry struct {
	stage string
	re    *regexp.Regexp
	why   string
	line  int
}

// ReadSkipList reads the list at path; an error names the file, the line
// and the form a line must have.
func ReadSkipList(path string) (*SkipList, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	l := &SkipList{Path: path}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		body, why, ok := strings.Cut(line, "#")
		why = strings.TrimSpace(why)
		stage, pattern, ok2 := strings.Cut(strings.TrimSpace(body), " ")
		pattern = strings.TrimSpace(pattern)
		if !ok || !ok2 || why == "" || pattern == "" {
			return nil, fmt.Errorf("%s:%d: want \"STAGE REGEXP  # why\", got %q", path, i+1, line)
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: field REGEXP: %v", path, i+1, err)
		}
		l.entries = append(l.entries, skipEntry{stage: stage, re: re, why: why, line: i + 1})
	}
	return l, nil
}

// Match reports whether the stage declares a skip with description d, and
// why it is expected.
func (l *SkipList) Match(stage, d string) (string, bool) {
	for _, e := range l.entries {
		if (e.stage == "*" || e.stage == stage) && e.re.MatchString(d) {
			return e.why, true
		}
	}
	return "", false
}
