package stattest

// Holds the gate's two tests to textbook values: exact Mann–Whitney
// p-values for complete separation (2/C(n1+n2,n1)), the worked examples of
// SciPy's mannwhitneyu documentation and R's wilcox.test help page
// (Hollander & Wolfe), the tie-corrected normal approximation, and
// Fisher's exact test on the lady tasting tea (Fisher 1935).

import (
	"math"
	"testing"
)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.6g, want %.6g (±%g)", what, got, want, tol)
	}
}

func TestMannWhitneyCompleteSeparation(t *testing.T) {
	for _, tc := range []struct {
		x, y []float64
		p    float64
	}{
		{[]float64{1, 2, 3}, []float64{4, 5, 6}, 2.0 / 20},
		{[]float64{1, 2, 3, 4}, []float64{5, 6, 7, 8}, 2.0 / 70},
		{[]float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}, 2.0 / 252},
	} {
		r, err := MannWhitneyU(tc.x, tc.y)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "p", r.P, tc.p, 1e-12)
		if r.U != 0 || !r.Exact {
			t.Errorf("U = %g (want 0), exact %v", r.U, r.Exact)
		}
		near(t, "MinP", MinP(len(tc.x), len(tc.y)), tc.p, 1e-12)
		// The test is symmetric: y against x has U = n1·n2 and the same p.
		r2, _ := MannWhitneyU(tc.y, tc.x)
		near(t, "p swapped", r2.P, tc.p, 1e-12)
		if r2.U != float64(len(tc.x)*len(tc.y)) {
			t.Errorf("swapped U = %g", r2.U)
		}
	}
	// α 0.05 needs 4 runs a side: 3 and 3 cannot reach it.
	if MinP(3, 3) < 0.05 || MinP(4, 4) >= 0.05 || MinP(1, 20) < 0.05 || MinP(3, 5) >= 0.05 {
		t.Errorf("MinP(3,3)=%g MinP(4,4)=%g MinP(1,20)=%g MinP(3,5)=%g", MinP(3, 3), MinP(4, 4), MinP(1, 20), MinP(3, 5))
	}
}

// SciPy's mannwhitneyu example (ages of male and female readers): U = 17,
// exact p 0.1111, asymptotic (with continuity correction) 0.11134688653314041.
func TestMannWhitneySciPyExample(t *testing.T) {
	males := []float64{19, 22, 16, 29, 24}
	females := []float64{20, 11, 17, 12}
	r, err := MannWhitneyU(males, females)
	if err != nil {
		t.Fatal(err)
	}
	if r.U != 17 {
		t.Errorf("U = %g, want 17", r.U)
	}
	near(t, "exact p", r.P, 0.1111111111111111, 1e-12)
	near(t, "asymptotic p", normalP(17, 5, 4, 0), 0.11134688653314041, 1e-12)
}

// R's ?wilcox.test, two-sample example (Hollander & Wolfe 1973, p. 69):
// W = 35, one-sided p 0.1272, so two-sided 0.2544.
func TestMannWhitneyRExample(t *testing.T) {
	x := []float64{0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46}
	y := []float64{1.15, 0.88, 0.90, 0.74, 1.21}
	r, _ := MannWhitneyU(x, y)
	if r.U != 35 {
		t.Errorf("W = %g, want 35", r.U)
	}
	near(t, "two-sided p", r.P, 2*0.1272, 1e-4)
}

// With ties the exact p counts midrank sums; checked against enumerating
// every split of the pooled samples.
func TestMannWhitneyTiesExactAgainstEnumeration(t *testing.T) {
	for _, tc := range []struct{ x, y []float64 }{
		{[]float64{0, 0, 0, 1103, 0}, []float64{1100, 1103, 0, 1104, 1101}}, // a bimodal figure
		{[]float64{0, 0, 0, 0}, []float64{0, 0, 1, 1, 1}},
		{[]float64{3, 3, 4, 4, 3}, []float64{4, 4, 4, 5, 4}},
	} {
		r, _ := MannWhitneyU(tc.x, tc.y)
		near(t, "exact p with ties", r.P, enumerateP(tc.x, tc.y), 1e-12)
	}
	// Every sample tied: nothing to tell apart.
	r, _ := MannWhitneyU([]float64{5, 5, 5}, []float64{5, 5, 5})
	if r.P != 1 {
		t.Errorf("all tied: p %g, want 1", r.P)
	}
	if normalP(12.5, 5, 5, 10*10*10-10) != 1 {
		t.Error("all tied, normal approximation: want p 1")
	}
}

// The tie correction, worked by hand on 22 + 22 samples (so the
// approximation is used): x eleven 1s and eleven 2s, y eleven 2s and
// eleven 3s. U of x = pairs x > y (none) + ½ · tied pairs (11·11) = 60.5;
// mean 22·22/2 = 242; runs of ties 11, 22, 11: Σ(t³−t) = 1320 + 10626 +
// 1320 = 13266; variance 22·22/12 · (45 − 13266/(44·43)) = 40.333 ·
// 37.988 = 1532.2; z = (181.5 − 0.5)/39.143 = 4.624; p = erfc(z/√2) =
// 3.76e-6 (without the tie correction it would be 4.12e-6).
func TestMannWhitneyNormalWithTies(t *testing.T) {
	var x, y []float64
	for range 11 {
		x = append(x, 1, 2)
		y = append(y, 2, 3)
	}
	r, _ := MannWhitneyU(x, y)
	if r.Exact {
		t.Fatalf("44 samples: want the normal approximation")
	}
	if r.U != 60.5 {
		t.Errorf("U = %g, want 60.5", r.U)
	}
	variance := 22.0 * 22 / 12 * (45 - 13266.0/(44*43))
	want := math.Erfc((181.5 - 0.5) / math.Sqrt(variance) / math.Sqrt2)
	near(t, "p", r.P, want, 1e-15)
	near(t, "p (value)", r.P, 3.76e-6, 0.01e-6)
}

func TestMannWhitneyNoSamples(t *testing.T) {
	if _, err := MannWhitneyU(nil, []float64{1}); err != ErrNoSamples {
		t.Errorf("err %v", err)
	}
}

// enumerateP is the exact two-sided p by listing every way to choose
// len(x) of the pooled samples: the definition, independent of the
// counting in exactP.
func enumerateP(x, y []float64) float64 {
	pool := append(append([]float64{}, x...), y...)
	n, k := len(pool), len(x)
	rank := func(v float64) float64 { // midrank of v in pool
		below, equal := 0, 0
		for _, w := range pool {
			if w < v {
				below++
			} else if w == v {
				equal++
			}
		}
		return float64(below) + float64(equal+1)/2
	}
	mean := float64(k*(n+1)) / 2
	var obs float64
	for _, v := range x {
		obs += rank(v)
	}
	extreme, all := 0, 0
	for mask := 0; mask < 1<<n; mask++ {
		if popcount(mask) != k {
			continue
		}
		var s float64
		for i := range n {
			if mask&(1<<i) != 0 {
				s += rank(pool[i])
			}
		}
		all++
		if math.Abs(s-mean) >= math.Abs(obs-mean)-1e-9 {
			extreme++
		}
	}
	return float64(extreme) / float64(all)
}

func popcount(v int) int {
	n := 0
	for ; v != 0; v &= v - 1 {
		n++
	}
	return n
}

// The lady tasting tea (Fisher 1935): 4 cups of each kind, all 4 picked
// right: p = 1/70; 3 of 4 right: p = 17/70.
func TestFisherLadyTastingTea(t *testing.T) {
	near(t, "4 of 4", FisherGreater(0, 4, 4, 4), 1.0/70, 1e-12)
	near(t, "3 of 4", FisherGreater(1, 4, 3, 4), 17.0/70, 1e-12)
	near(t, "FisherMinP(4,4)", FisherMinP(4, 4), 1.0/70, 1e-12)
	// 0 of 5 against 5 of 5 runs in a slow mode; 0 against 4; and no
	// difference at all.
	near(t, "5 of 5 vs 0", FisherGreater(0, 5, 5, 5), 1.0/252, 1e-12)
	near(t, "4 of 5 vs 0", FisherGreater(0, 5, 4, 5), 5.0/210, 1e-12)
	if p := FisherGreater(2, 5, 2, 5); p < 0.5 {
		t.Errorf("equal shares: p %g", p)
	}
}

// The one-sided p: complete separation gives 1/C(n1+n2,n1) (half the
// two-sided), the other direction 1; R's ?wilcox.test example is
// one-sided 0.1272 (x greater than y, so PGreater of y against x); the
// exact and the normal one-sided p agree on a large sample; the exact
// one-sided p matches enumeration with ties.
func TestMannWhitneyGreater(t *testing.T) {
	lo, hi := []float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}
	r, _ := MannWhitneyU(lo, hi)
	near(t, "PGreater, every y above every x", r.PGreater, 1.0/252, 1e-12)
	near(t, "MinPGreater(5,5)", MinPGreater(5, 5), 1.0/252, 1e-12)
	r, _ = MannWhitneyU(hi, lo)
	near(t, "PGreater, every y below every x", r.PGreater, 1, 1e-12)
	x := []float64{0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46}
	y := []float64{1.15, 0.88, 0.90, 0.74, 1.21}
	r, _ = MannWhitneyU(y, x)
	near(t, "R's one-sided p", r.PGreater, 0.1272, 1e-4)
	// Large samples: the normal one-sided p near the exact one.
	var a, b []float64
	for i := range 20 {
		a = append(a, float64(i))
		b = append(b, float64(i)+6.5)
	}
	ranks2, ties := doubledMidranks(a, b)
	rx2 := 0
	for i := range a {
		rx2 += ranks2[i]
	}
	u := float64(rx2)/2 - float64(20*21)/2
	near(t, "normal vs exact one-sided", normalPLess(u, 20, 20, ties), exactPLess(ranks2, 20, rx2), 0.003)
	// Ties: exact one-sided against enumeration.
	tx, ty := []float64{0, 0, 0, 1100, 0}, []float64{0, 1100, 1101, 1102, 0}
	r, _ = MannWhitneyU(tx, ty)
	near(t, "tied one-sided", r.PGreater, enumeratePLess(tx, ty), 1e-12)
	// 5 runs a side: Holm over two gated figures at a family-wise 0.01
	// asks 0.005 of the smallest p; complete separation gives 0.0040.
	if MinPGreater(5, 5) >= 0.01/2 || MinPGreater(4, 4) < 0.01/2 || MinPGreater(5, 5) < 0.01/3 {
		t.Errorf("MinPGreater(5,5)=%g MinPGreater(4,4)=%g", MinPGreater(5, 5), MinPGreater(4, 4))
	}
}

// enumeratePLess is the one-sided p by brute force: over every choice of
// len(x) of the pooled samples as x, the share whose U is at most x's.
func enumeratePLess(x, y []float64) float64 {
	pool := append(append([]float64{}, x...), y...)
	u := func(xs, ys []float64) float64 {
		var s float64
		for _, a := range xs {
			for _, b := range ys {
				switch {
				case a > b:
					s++
				case a == b:
					s += 0.5
				}
			}
		}
		return s
	}
	obs := u(x, y)
	n, n1 := len(pool), len(x)
	var hit, all float64
	for mask := 0; mask < 1<<n; mask++ {
		if popcount(mask) != n1 {
			continue
		}
		var xs, ys []float64
		for i, v := range pool {
			if mask&(1<<i) != 0 {
				xs = append(xs, v)
			} else {
				ys = append(ys, v)
			}
		}
		all++
		if u(xs, ys) <= obs+1e-9 {
			hit++
		}
	}
	return hit / all
}

// Holm's adjustment against R's p.adjust(c(0.01, 0.02, 0.03, 0.04,
// 0.05), "holm"): 0.05 0.08 0.09 0.09 0.09 (the running maximum), in the
// order given; one p is itself.
func TestHolm(t *testing.T) {
	got := Holm([]float64{0.03, 0.01, 0.05, 0.02, 0.04})
	want := []float64{0.09, 0.05, 0.09, 0.08, 0.09}
	for i := range want {
		near(t, "Holm", got[i], want[i], 1e-12)
	}
	near(t, "Holm of one", Holm([]float64{0.004})[0], 0.004, 0)
	if len(Holm(nil)) != 0 {
		t.Error("Holm of none should be empty")
	}
	near(t, "capped at 1", Holm([]float64{0.6, 0.7})[0], 1, 0)
}
