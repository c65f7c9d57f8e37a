package results

// Holds `birdcage results merge` and compare's directory sides in place:
// shards of one run join into exactly their rows; a scenario in two shards,
// two builds or two kernels are refused with an error naming both files;
// a history keeps every run's rows of a scenario as its samples.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/env"
)

func shardFile(build, kernel string, specs ...string) *ResultsFile {
	f := &ResultsFile{Started: time.Date(2026, 12, 6, 13, 0, 0, 0, time.UTC), Kernel: kernel,
		Env: &RunEnv{Where: "native", ProbeRate: 1000, Build: build}}
	for _, s := range specs {
		f.Scenarios = append(f.Scenarios, ScenarioResult{Name: s, Spec: s, Verdict: VerdictPass, Passed: true,
			Figures: map[string]float64{"lostProbes": 1}})
	}
	return f
}

func TestMergeShards(t *testing.T) {
	a := shardFile("abc", "6.18", "s1", "s3")
	b := shardFile("abc", "6.18", "s2")
	b.Started = a.Started.Add(-time.Minute)
	m, err := Merge([]Named{{"a.json", a}, {"b.json", b}}, Shards)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range m.Scenarios {
		keys = append(keys, s.Key())
	}
	if strings.Join(keys, ",") != "s1,s3,s2" || !m.Started.Equal(b.Started) || m.Env.Build != "abc" || m.Kernel != "6.18" {
		t.Errorf("merged rows %v, started %v, build %q, kernel %q", keys, m.Started, m.Env.Build, m.Kernel)
	}
	// A repeated scenario within one shard is its samples, not a duplicate.
	rep := shardFile("abc", "6.18", "s4", "s4", "s4")
	if m, err := Merge([]Named{{"a.json", a}, {"rep.json", rep}}, Shards); err != nil || len(m.Scenarios) != 5 || m.Repeats["s4"].Runs != 3 {
		t.Errorf("repeats inside one shard: %v, %d rows", err, len(m.Scenarios))
	}
}

func TestMergeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []Named
		err   error
		want  []string
	}{
		{"a scenario in two shards", []Named{{"a.json", shardFile("abc", "6.18", "s1", "s2")}, {"b.json", shardFile("abc", "6.18", "s2")}},
			ErrDuplicateScenario, []string{`"s2"`, "a.json", "b.json"}},
		{"two builds", []Named{{"a.json", shardFile("abc", "6.18", "s1")}, {"b.json", shardFile("def", "6.18", "s2")}},
			ErrMixedBuilds, []string{`"def"`, `"abc"`, "a.json", "b.json", env.Build}},
		{"two kernels", []Named{{"a.json", shardFile("abc", "6.18", "s1")}, {"b.json", shardFile("abc", "6.1", "s2")}},
			ErrMixedKernels, []string{"6.1", "6.18", "a.json", "b.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Merge(tc.files, Shards)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
	// Positive control: the same files as a history (runs one after
	// another) join, builds differing, every row kept.
	m, err := Merge([]Named{{"a.json", shardFile("abc", "6.18", "s1", "s2")}, {"b.json", shardFile("def", "6.18", "s2")}}, History)
	if err != nil || len(m.Scenarios) != 3 || m.Repeats["s2"].Runs != 2 {
		t.Errorf("history: %v, %+v", err, m)
	}
	if _, err := Merge([]Named{{"a.json", shardFile("abc", "6.18", "s1")}, {"b.json", shardFile("abc", "6.1", "s1")}}, History); !errors.Is(err, ErrMixedKernels) {
		t.Errorf("a history over two kernels: %v", err)
	}
	if _, err := Merge(nil, Shards); err == nil {
		t.Error("merging nothing succeeded")
	}
}

func TestReadSideDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, f *ResultsFile) {
		r := &Results{path: filepath.Join(dir, name), doc: *f}
		if err := r.write(); err != nil {
			t.Fatal(err)
		}
	}
	write("run-1.json", shardFile("abc", "6.18", "s1"))
	write("run-2.json", shardFile("abd", "6.18", "s1"))
	f, label, err := ReadSide(dir)
	if err != nil || len(f.Scenarios) != 2 || !strings.Contains(label, "2 runs: run-1.json, run-2.json") {
		t.Fatalf("directory side: %v, label %q", err, label)
	}
	one, label, err := ReadSide(filepath.Join(dir, "run-1.json"))
	if err != nil || len(one.Scenarios) != 1 || label != filepath.Join(dir, "run-1.json") {
		t.Errorf("file side: %v, label %q", err, label)
	}
	empty := t.TempDir()
	if _, _, err := ReadSide(empty); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty directory: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "junk.json"), []byte("{}"), 0o644)
	if _, _, err := ReadSide(dir); err == nil || !strings.Contains(err.Error(), "junk.json") {
		t.Errorf("a directory with a file that is not results: %v", err)
	}
}
