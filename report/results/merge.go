package results

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/birdcage/birdcage/internal/env"
)

// Sentinel errors of Merge, for callers that tell them apart.
var (
	// ErrDuplicateScenario: one scenario's rows are in two files that
	// should not overlap (shards of one run).
	ErrDuplicateScenario = errors.New("duplicate scenario")
	// ErrMixedBuilds: the files were written by different builds.
	ErrMixedBuilds = errors.New("mixed builds")
	// ErrMixedKernels: the files were written on different kernels (or
	// one natively and one in a VM).
	ErrMixedKernels = errors.New("mixed kernels")
)

// Named is a results file with the path it was read from.
type Named struct {
	Path string
	File *ResultsFile
}

// MergeMode says what the files being joined are.
type MergeMode int

const (
	// Shards are parts of one run (`birdcage run --shard i/n` on n
	// machines): one build, one kernel, and no scenario in two of them.
	Shards MergeMode = iota
	// History is runs of one suite one after another (the last K accepted
	// runs of a baseline): every scenario in each, so a scenario's rows
	// from every file are its samples; one kernel, builds may differ.
	History
)

// Merge joins results files into one: the rows of each in file order, the
// earliest start, the first file's environment. It refuses files written
// on different kernels or platforms (ErrMixedKernels) and, for shards,
// files of different builds (ErrMixedBuilds) and a scenario whose rows are
// in two files (ErrDuplicateScenario); the error names both files.
func Merge(files []Named, mode MergeMode) (*ResultsFile, error) {
	if len(files) == 0 {
		return nil, errors.New("results merge: no results files to join")
	}
	first := files[0]
	out := &ResultsFile{Started: first.File.Started, Kernel: first.File.Kernel, Scenarios: []ScenarioResult{}}
	if first.File.Env != nil {
		env := *first.File.Env
		out.Env = &env
	}
	owner := map[string]int{} // scenario key → the file its rows came from
	for i, f := range files {
		if f.File.Kernel != first.File.Kernel || where(f.File.Env) != where(first.File.Env) {
			return nil, fmt.Errorf("results merge: %s ran on kernel %s (%s) but %s on %s (%s): %w; figures of two platforms are not samples of one",
				f.Path, f.File.Kernel, where(f.File.Env), first.Path, first.File.Kernel, where(first.File.Env), ErrMixedKernels)
		}
		if mode == Shards && buildOf(f.File.Env) != buildOf(first.File.Env) {
			return nil, fmt.Errorf("results merge: %s is build %q but %s is build %q: %w; shards of one run come from one build (env.build: $%s, else the checkout's commit)",
				f.Path, buildOf(f.File.Env), first.Path, buildOf(first.File.Env), ErrMixedBuilds, env.Build)
		}
		if f.File.Started.Before(out.Started) {
			out.Started = f.File.Started
		}
		if out.Env != nil && out.Env.Tunnel == "" && f.File.Env != nil {
			out.Env.Tunnel = f.File.Env.Tunnel
		}
		seen := map[string]bool{}
		for _, s := range f.File.Scenarios {
			k := s.Key()
			if o, ok := owner[k]; ok && o != i && mode == Shards && !seen[k] {
				return nil, fmt.Errorf("results merge: scenario %q is in %s and in %s: %w; shards of one run do not overlap (was one shard run twice?)",
					s.Name, files[o].Path, f.Path, ErrDuplicateScenario)
			}
			seen[k] = true
			if _, ok := owner[k]; !ok {
				owner[k] = i
			}
			out.Scenarios = append(out.Scenarios, s)
		}
	}
	out.Repeats = summarizeRepeats(out.Scenarios)
	return out, nil
}

func where(e *RunEnv) string {
	if e == nil {
		return "unknown platform"
	}
	if e.VMAccel != "" {
		return e.Where + " " + e.VMAccel
	}
	return e.Where
}

func buildOf(e *RunEnv) string {
	if e == nil {
		return ""
	}
	return e.Build
}

// ReadSide reads one side of a comparison: a results file, or a directory
// of them (every *.json in it, in name order) joined as a History. label
// names what was read, for the comparison's header.
func ReadSide(path string) (f *ResultsFile, label string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("results %s: %w", path, err)
	}
	if !st.IsDir() {
		f, err := ReadResults(path)
		return f, path, err
	}
	paths, err := filepath.Glob(filepath.Join(path, "*.json"))
	if err != nil {
		return nil, "", err
	}
	sort.Strings(paths)
	if len(paths) == 0 {
		return nil, "", fmt.Errorf("results %s: a directory with no *.json results files in it", path)
	}
	var files []Named
	for _, p := range paths {
		rf, err := ReadResults(p)
		if err != nil {
			return nil, "", err
		}
		files = append(files, Named{Path: p, File: rf})
	}
	f, err = Merge(files, History)
	if err != nil {
		return nil, "", err
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	return f, fmt.Sprintf("%s (%d runs: %s)", path, len(paths), strings.Join(names, ", ")), nil
}
