package shard

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Spec is one spec of the suite: its full text (what Ginkgo's focus
// matches and the results rows' key), its labels, and how long it took
// when last recorded (0: unknown).
type Spec struct {
	Text    string
	Labels  []string
	Seconds float64
	// Ordered names the Ordered container the spec is in ("": none). The
	// specs of one Ordered container share state (the live-change sweep's
	// points and the fit over them) and go to one shard together.
	Ordered string
}

// TimingLabel marks the specs that report or judge a time and so run
// alone, never beside another spec (ci/scenario-shards).
const TimingLabel = "timing"

// Timing says whether the spec runs alone.
func (s Spec) Timing() bool { return slices.Contains(s.Labels, TimingLabel) }

// Which is one shard of n: I runs from 1 to N.
type Which struct{ I, N int }

func (w Which) String() string { return fmt.Sprintf("%d/%d", w.I, w.N) }

// Parse reads "i/n" (1 ≤ i ≤ n); flag names the option or variable for the
// error.
func Parse(flag, s string) (Which, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return Which{}, fmt.Errorf("%s %q: want i/n, the i-th of n shards, 1 ≤ i ≤ n (1/2, 2/2)", flag, s)
	}
	return Which{I: i, N: n}, nil
}

// Split puts every spec in exactly one of n shards, the same way on every
// machine given the same specs and durations. The `timing` specs (which
// run one at a time, after the others) and the rest (which run side by
// side) are balanced separately, each by longest processing time first:
// the longest spec not yet placed goes to the shard with the least time so
// far of its kind (ties: the lower shard; equal durations: by text). A
// spec without a recorded duration counts as the median of those with
// one (1 s when none has one), so an unrecorded suite splits by count.
func Split(specs []Spec, n int) [][]Spec {
	if n < 1 {
		n = 1
	}
	fill := median(specs)
	out := make([][]Spec, n)
	// A unit is what is placed: one spec, or every spec of one Ordered
	// container, its time the sum.
	type unit struct {
		key     string
		specs   []Spec
		seconds float64
	}
	for _, timing := range []bool{true, false} {
		var units []*unit
		byKey := map[string]*unit{}
		for _, s := range specs {
			if s.Timing() != timing {
				continue
			}
			if s.Seconds <= 0 {
				s.Seconds = fill
			}
			key := "spec\x00" + s.Text
			if s.Ordered != "" {
				key = "ordered\x00" + s.Ordered
			}
			u, ok := byKey[key]
			if !ok {
				u = &unit{key: key}
				byKey[key] = u
				units = append(units, u)
			}
			u.specs = append(u.specs, s)
			u.seconds += s.Seconds
		}
		sort.SliceStable(units, func(a, b int) bool {
			if units[a].seconds != units[b].seconds {
				return units[a].seconds > units[b].seconds
			}
			return units[a].key < units[b].key
		})
		load := make([]float64, n)
		for _, u := range units {
			best := 0
			for i := 1; i < n; i++ {
				if load[i] < load[best] {
					best = i
				}
			}
			load[best] += u.seconds
			out[best] = append(out[best], u.specs...)
		}
	}
	for i := range out {
		sort.SliceStable(out[i], func(a, b int) bool { return out[i][a].Text < out[i][b].Text })
	}
	return out
}

func median(specs []Spec) float64 {
	var known []float64
	for _, s := range specs {
		if s.Seconds > 0 {
			known = append(known, s.Seconds)
		}
	}
	if len(known) == 0 {
		return 1
	}
	sort.Float64s(known)
	return known[len(known)/2]
}

// Seconds is the recorded time of specs: the timing ones (run one after
// another) and the others (run side by side).
func Seconds(specs []Spec) (timing, other float64) {
	for _, s := range specs {
		if s.Timing() {
			timing += s.Seconds
		} else {
			other += s.Seconds
		}
	}
	return timing, other
}

// Focus is the Ginkgo focus (-ginkgo.focus) that selects exactly specs in
// a suite described as suite: Ginkgo matches a focus against the suite's
// description, a space and the spec's full text. "" for no specs (a focus
// that would select nothing must not be passed as one that selects all).
func Focus(suite string, specs []Spec) string {
	if len(specs) == 0 {
		return ""
	}
	texts := make([]string, len(specs))
	for i, s := range specs {
		texts[i] = regexp.QuoteMeta(s.Text)
	}
	return "^" + regexp.QuoteMeta(suite) + " (?:" + strings.Join(texts, "|") + ")$"
}
