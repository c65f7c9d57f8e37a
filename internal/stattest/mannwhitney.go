package stattest

import (
	"errors"
	"math"
	"sort"
)

// MannWhitney is the outcome of a two-sided Mann–Whitney U test of x
// against y.
type MannWhitney struct {
	// U is x's statistic: the pairs (xi, yj) with xi > yj, a tie counting
	// one half. It runs from 0 (every x below every y) to N1·N2.
	U      float64 `json:"u"`
	N1, N2 int
	// P is the two-sided p-value: the chance, were x and y drawn from one
	// distribution, of a U at least as far from its mean N1·N2/2 as the
	// one observed.
	P float64 `json:"p"`
	// PGreater is the one-sided p-value that y tends to be larger than x
	// (the gate's question: did NEW get worse?): the chance, were x and y
	// drawn from one distribution, of a U as small as the one observed or
	// smaller. R's wilcox.test(y, x, alternative = "greater").
	PGreater float64 `json:"pGreater"`
	// Exact says P is the exact permutation probability (midranks for
	// ties); false: the normal approximation with the tie correction and a
	// continuity correction of ½.
	Exact bool `json:"exact"`
}

// ErrNoSamples: one side has no sample; there is nothing to rank.
var ErrNoSamples = errors.New("Mann–Whitney U: each side needs at least one sample")

// exactLimit is the most samples (both sides together) whose exact
// distribution is counted; above it the normal approximation is used (at
// 40 samples it is within a few thousandths of the exact p).
const exactLimit = 40

// MannWhitneyU tests x against y, two-sided.
func MannWhitneyU(x, y []float64) (MannWhitney, error) {
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return MannWhitney{}, ErrNoSamples
	}
	r := MannWhitney{N1: n1, N2: n2}
	ranks2, ties := doubledMidranks(x, y)
	var rx2 int // twice x's rank sum
	for i := range n1 {
		rx2 += ranks2[i]
	}
	r.U = float64(rx2)/2 - float64(n1*(n1+1))/2
	if n1+n2 <= exactLimit {
		r.P, r.PGreater, r.Exact = exactP(ranks2, n1, rx2), exactPLess(ranks2, n1, rx2), true
		return r, nil
	}
	r.P, r.PGreater = normalP(r.U, n1, n2, ties), normalPLess(r.U, n1, n2, ties)
	return r, nil
}

// normalP is the two-sided p of U under the normal approximation: mean
// n1·n2/2, variance n1·n2/12 · ((n+1) − Σ(t³−t)/(n(n−1))) (the tie
// correction), and ½ taken off |U − mean| (the continuity correction).
func normalP(u float64, n1, n2 int, ties float64) float64 {
	n := float64(n1 + n2)
	mean := float64(n1*n2) / 2
	variance := float64(n1*n2) / 12 * ((n + 1) - ties/(n*(n-1)))
	if variance <= 0 {
		return 1 // every sample tied: no difference to see
	}
	z := (math.Abs(u-mean) - 0.5) / math.Sqrt(variance)
	return min(1, math.Erfc(max(z, 0)/math.Sqrt2))
}

// normalPLess is the one-sided p of a U this small or smaller under the
// normal approximation of normalP (the continuity correction added to U).
func normalPLess(u float64, n1, n2 int, ties float64) float64 {
	n := float64(n1 + n2)
	mean := float64(n1*n2) / 2
	variance := float64(n1*n2) / 12 * ((n + 1) - ties/(n*(n-1)))
	if variance <= 0 {
		return 1
	}
	z := (u + 0.5 - mean) / math.Sqrt(variance)
	return min(1, math.Erfc(-z/math.Sqrt2)/2)
}

// MinPGreater is the smallest one-sided p-value (PGreater) the test can
// give with n1 and n2 samples: 1 / C(n1+n2, n1), every y above every x.
// 5 runs a side: 1/252 ≈ 0.0040; 6: 1/924 ≈ 0.0011; 7: 1/3432 ≈ 0.00029.
func MinPGreater(n1, n2 int) float64 {
	if n1 == 0 || n2 == 0 {
		return 1
	}
	return min(1, 1/binomial(n1+n2, n1))
}

// MinP is the smallest two-sided p-value the test can give with n1 and n2
// samples (no ties): 2 / C(n1+n2, n1), when one side lies wholly above the
// other. Fewer samples than make MinP < α cannot show a difference at α,
// however large it is.
func MinP(n1, n2 int) float64 {
	if n1 == 0 || n2 == 0 {
		return 1
	}
	return min(1, 2/binomial(n1+n2, n1))
}

// doubledMidranks ranks x then y together, each rank doubled so that a
// midrank (the mean of the ranks a run of ties spans) is a whole number,
// and returns Σ(t³−t) over the runs of ties t long (the tie correction).
func doubledMidranks(x, y []float64) ([]int, float64) {
	type sample struct {
		v float64
		i int
	}
	all := make([]sample, 0, len(x)+len(y))
	for i, v := range x {
		all = append(all, sample{v, i})
	}
	for i, v := range y {
		all = append(all, sample{v, len(x) + i})
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].v < all[b].v })
	ranks := make([]int, len(all))
	var ties float64
	for lo := 0; lo < len(all); {
		hi := lo
		for hi+1 < len(all) && all[hi+1].v == all[lo].v {
			hi++
		}
		// Ranks lo+1 … hi+1 share their mean; doubled: lo+hi+2.
		for k := lo; k <= hi; k++ {
			ranks[all[k].i] = lo + hi + 2
		}
		t := float64(hi - lo + 1)
		ties += t*t*t - t
		lo = hi + 1
	}
	return ranks, ties
}

// rankSumWays counts, for every sum s, the ways of choosing n1 of the
// (doubled) ranks whose sum is s: the exact null distribution of x's rank
// sum.
func rankSumWays(ranks2 []int, n1 int) []float64 {
	total := 0
	for _, r := range ranks2 {
		total += r
	}
	// ways[k][s]: subsets of k ranks summing to s.
	ways := make([][]float64, n1+1)
	for k := range ways {
		ways[k] = make([]float64, total+1)
	}
	ways[0][0] = 1
	for i, r := range ranks2 {
		for k := min(i+1, n1); k >= 1; k-- {
			for s := total; s >= r; s-- {
				ways[k][s] += ways[k-1][s-r]
			}
		}
	}
	return ways[n1]
}

// exactP counts, over every way of choosing n1 of the ranks as x's, the
// choices whose rank sum is at least as far from its mean as rx2 is (all
// in doubled ranks, so the comparison is exact), and divides by the number
// of choices.
func exactP(ranks2 []int, n1, rx2 int) float64 {
	// The mean of x's rank sum in doubled ranks: n1·(n+1).
	mean2 := n1 * (len(ranks2) + 1)
	dev := abs(rx2 - mean2)
	var extreme, all float64
	for s, w := range rankSumWays(ranks2, n1) {
		all += w
		if w != 0 && abs(s-mean2) >= dev {
			extreme += w
		}
	}
	return min(1, extreme/all)
}

// exactPLess is the one-sided exact p that x's rank sum is rx2 or less
// (in doubled ranks): every way of choosing n1 of the ranks as x's, the
// share with a sum that small.
func exactPLess(ranks2 []int, n1, rx2 int) float64 {
	var extreme, all float64
	for s, w := range rankSumWays(ranks2, n1) {
		all += w
		if s <= rx2 {
			extreme += w
		}
	}
	return min(1, extreme/all)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// binomial is C(n, k) as a float64.
func binomial(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	k = min(k, n-k)
	c := 1.0
	for i := 1; i <= k; i++ {
		c = c * float64(n-k+i) / float64(i)
	}
	return c
}
