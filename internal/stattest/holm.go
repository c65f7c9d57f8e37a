package stattest

import "sort"

// Holm is Holm's step-down adjustment of m p-values for the family-wise
// error rate: sorted ascending, the i-th smallest (from 0) is multiplied by
// m−i, each kept at least as large as the one before it and at most 1.
// Rejecting every hypothesis whose adjusted p is below α keeps the chance
// of one or more false rejections in the family at α or less, whatever
// the tests' dependence (Holm 1979). It returns the adjusted p-values in
// the order of ps; with one p it is that p.
func Holm(ps []float64) []float64 {
	m := len(ps)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ps[order[a]] < ps[order[b]] })
	adj := make([]float64, m)
	prev := 0.0
	for rank, i := range order {
		a := min(1, float64(m-rank)*ps[i])
		prev = max(prev, a)
		adj[i] = prev
	}
	return adj
}
