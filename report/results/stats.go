package results

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Stats is the distribution of one figure over its samples (repeats, nodes,
// flows): enough to tell a flake (one sample far out) from a regression
// (the median moved). Samples are kept in the order they were taken.
type Stats struct {
	N       int       `json:"n"`
	Min     float64   `json:"min"`
	Median  float64   `json:"median"`
	P95     float64   `json:"p95"`
	Max     float64   `json:"max"`
	Mean    float64   `json:"mean"`
	Samples []float64 `json:"samples"`
}

// Summarize computes the distribution of samples. Quantiles interpolate
// linearly between order statistics (Hyndman & Fan type 7, the default of
// R and NumPy), so the p95 of five samples lies between the 4th and 5th.
// No samples give the zero Stats.
func Summarize(samples []float64) Stats {
	s := Stats{N: len(samples), Samples: append([]float64{}, samples...)}
	if s.N == 0 {
		return s
	}
	sorted := append([]float64(nil), samples...)
	sort.Float64s(sorted)
	var sum float64
	for _, v := range sorted {
		sum += v
	}
	s.Min, s.Max, s.Mean = sorted[0], sorted[s.N-1], sum/float64(s.N)
	s.Median, s.P95 = quantile(sorted, 0.5), quantile(sorted, 0.95)
	return s
}

// quantile of sorted samples, type 7.
func quantile(sorted []float64, q float64) float64 {
	h := q * float64(len(sorted)-1)
	lo := math.Floor(h)
	i := int(lo)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (h-lo)*(sorted[i+1]-sorted[i])
}

func (s Stats) String() string {
	if s.N == 0 {
		return "no samples"
	}
	return fmt.Sprintf("min %.1f / median %.1f / p95 %.1f / max %.1f (n=%d)", s.Min, s.Median, s.P95, s.Max, s.N)
}

// Fit is a least-squares line y ≈ A·x + B through paired samples, with the
// residual of every sample (y − (A·x + B), in sample order).
type Fit struct {
	A         float64   `json:"a"`
	B         float64   `json:"b"`
	R2        float64   `json:"r2"`
	Residuals []float64 `json:"residuals"`
	// RMS is the root mean square of the residuals; MaxAbsResidual the
	// largest in absolute value.
	RMS            float64 `json:"rms"`
	MaxAbsResidual float64 `json:"maxAbsResidual"`
}

// ErrDegenerateFit is returned when the x values do not span a line (fewer
// than two distinct x).
var ErrDegenerateFit = errors.New("least-squares fit: need at least two distinct x values")

// LinearFit fits y ≈ A·x + B by ordinary least squares.
func LinearFit(x, y []float64) (Fit, error) {
	if len(x) != len(y) {
		return Fit{}, fmt.Errorf("least-squares fit: %d x values but %d y values", len(x), len(y))
	}
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	if n == 0 {
		return Fit{}, ErrDegenerateFit
	}
	mx, my = mx/n, my/n
	var sxx, sxy, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if sxx == 0 {
		return Fit{}, ErrDegenerateFit
	}
	f := Fit{A: sxy / sxx}
	f.B = my - f.A*mx
	var ss float64
	for i := range x {
		r := y[i] - (f.A*x[i] + f.B)
		f.Residuals = append(f.Residuals, r)
		ss += r * r
		f.MaxAbsResidual = max(f.MaxAbsResidual, math.Abs(r))
	}
	f.RMS = math.Sqrt(ss / n)
	f.R2 = 1
	if syy > 0 {
		f.R2 = 1 - ss/syy
	}
	return f, nil
}

func (f Fit) String() string {
	return fmt.Sprintf("y ≈ %.3f·x %+.1f (R² %.4f, residual RMS %.1f, max |residual| %.1f)", f.A, f.B, f.R2, f.RMS, f.MaxAbsResidual)
}
