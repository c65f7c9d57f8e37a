package shard

// Holds the split in place: every spec in exactly one shard, the same on
// every call whatever the input order, timing specs and the rest each
// balanced by recorded duration, and a focus that selects exactly its
// specs' full texts (regular-expression characters in them included).

import (
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

func suite() []Spec {
	var specs []Spec
	for i := range 30 {
		s := Spec{Text: fmt.Sprintf("Family %d spec (a|b) [x] %d.5 ms?", i%4, i), Seconds: float64(5 + (i*37)%90)}
		if i%3 == 0 {
			s.Labels = []string{"timing"}
		}
		if i%7 == 0 {
			s.Seconds = 0 // not recorded
		}
		specs = append(specs, s)
	}
	return specs
}

func TestSplitPartitionsDeterministically(t *testing.T) {
	specs := suite()
	for _, n := range []int{1, 2, 3, 5} {
		parts := Split(specs, n)
		seen := map[string]int{}
		for _, p := range parts {
			for _, s := range p {
				seen[s.Text]++
			}
		}
		for _, s := range specs {
			if seen[s.Text] != 1 {
				t.Errorf("n=%d: %q in %d shards, want 1", n, s.Text, seen[s.Text])
			}
		}
		if len(seen) != len(specs) {
			t.Errorf("n=%d: %d specs placed, want %d", n, len(seen), len(specs))
		}
		// The same split from the specs in another order.
		shuffled := append([]Spec{}, specs...)
		rand.New(rand.NewSource(int64(n))).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again := Split(shuffled, n)
		for i := range parts {
			if texts(parts[i]) != texts(again[i]) {
				t.Errorf("n=%d shard %d differs with the input shuffled", n, i+1)
			}
		}
	}
}

// Evenly: with LPT no shard's time of a kind exceeds another's by more
// than the longest spec of that kind.
func TestSplitBalancesEachKind(t *testing.T) {
	specs := suite()
	parts := Split(specs, 3)
	var longestT, longestO float64
	for _, s := range specs {
		if s.Timing() {
			longestT = max(longestT, s.Seconds)
		} else {
			longestO = max(longestO, s.Seconds)
		}
	}
	var ts, os []float64
	for _, p := range parts {
		tm, o := Seconds(p)
		ts, os = append(ts, tm), append(os, o)
	}
	if spread(ts) > longestT || spread(os) > longestO {
		t.Errorf("timing seconds per shard %v (longest spec %g), others %v (longest %g)", ts, longestT, os, longestO)
	}
	// Guard: both kinds were there to balance, in every shard.
	for i, p := range parts {
		tm, o := Seconds(p)
		if tm == 0 || o == 0 {
			t.Errorf("shard %d: timing %g s, others %g s; want both", i+1, tm, o)
		}
	}
}

func TestFocusSelectsExactlyItsSpecs(t *testing.T) {
	specs := suite()
	parts := Split(specs, 2)
	re := regexp.MustCompile(Focus("birdcage scenarios", parts[0]))
	in := map[string]bool{}
	for _, s := range parts[0] {
		in[s.Text] = true
	}
	for _, s := range specs {
		// What Ginkgo matches: the suite's description, a space, the text.
		if got := re.MatchString("birdcage scenarios " + s.Text); got != in[s.Text] {
			t.Errorf("%q: focus matches %v, in shard %v", s.Text, got, in[s.Text])
		}
		if re.MatchString("birdcage scenarios " + s.Text + " more") {
			t.Errorf("%q: the focus matches a longer text", s.Text)
		}
	}
	if Focus("x", nil) != "" {
		t.Error("a focus for no specs must be empty")
	}
}

func TestParse(t *testing.T) {
	if w, err := Parse("--shard", "2/3"); err != nil || w != (Which{2, 3}) || w.String() != "2/3" {
		t.Errorf("2/3: %v %v", w, err)
	}
	for _, bad := range []string{"0/2", "3/2", "1", "a/b", "1/0", ""} {
		if _, err := Parse("--shard", bad); err == nil || !strings.Contains(err.Error(), "--shard") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func texts(specs []Spec) string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Text)
	}
	return strings.Join(out, "\n")
}

func spread(v []float64) float64 {
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return hi - lo
}
