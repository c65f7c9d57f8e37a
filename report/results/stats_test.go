package results

import (
	"errors"
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		in                       []float64
		min, med, p95, max, mean float64
	}{
		{"one sample", []float64{7}, 7, 7, 7, 7, 7},
		{"two", []float64{2, 1}, 1, 1.5, 1.95, 2, 1.5},
		// type 7: h = 0.95·4 = 3.8 → 40 + 0.8·(1000−40)
		{"five with an outlier", []float64{10, 30, 20, 1000, 40}, 10, 30, 808, 1000, 220},
		{"odd count median", []float64{3, 1, 2}, 1, 2, 2.9, 3, 2},
		{"ties", []float64{5, 5, 5, 5}, 5, 5, 5, 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(tc.in)
			if s.N != len(tc.in) || !near(s.Min, tc.min) || !near(s.Median, tc.med) || !near(s.P95, tc.p95) || !near(s.Max, tc.max) || !near(s.Mean, tc.mean) {
				t.Errorf("Summarize(%v) = %+v; want min %v median %v p95 %v max %v mean %v", tc.in, s, tc.min, tc.med, tc.p95, tc.max, tc.mean)
			}
			for i := range tc.in {
				if s.Samples[i] != tc.in[i] {
					t.Fatalf("samples reordered or lost: %v, want %v", s.Samples, tc.in)
				}
			}
		})
	}
	if s := Summarize(nil); s.N != 0 || s.String() != "no samples" {
		t.Errorf("empty: %+v", s)
	}
	in := []float64{3, 1, 2}
	Summarize(in)
	if in[0] != 3 {
		t.Error("Summarize sorted the caller's slice")
	}
}

func TestLinearFit(t *testing.T) {
	// An exact line: slope 1, intercept −50, no residuals.
	x := []float64{0, 200, 1000, 3000}
	y := []float64{-50, 150, 950, 2950}
	f, err := LinearFit(x, y)
	if err != nil {
		t.Fatal(err)
	}
	if !near(f.A, 1) || !near(f.B, -50) || !near(f.R2, 1) || f.MaxAbsResidual > 1e-9 || len(f.Residuals) != 4 {
		t.Errorf("exact line: %+v", f)
	}
	// Repeats at each x with symmetric noise: the fit goes through the
	// means, the residuals are the noise.
	x = []float64{0, 0, 1000, 1000}
	y = []float64{10, 30, 1010, 1030}
	if f, err = LinearFit(x, y); err != nil {
		t.Fatal(err)
	}
	if !near(f.A, 1) || !near(f.B, 20) || !near(f.RMS, 10) || !near(f.MaxAbsResidual, 10) {
		t.Errorf("noisy repeats: %+v", f)
	}
	want := []float64{-10, 10, -10, 10}
	for i := range want {
		if !near(f.Residuals[i], want[i]) {
			t.Errorf("residual %d = %v, want %v", i, f.Residuals[i], want[i])
		}
	}
	// A flat response (the gap does not depend on the delay) has slope 0.
	if f, _ = LinearFit([]float64{0, 1, 2}, []float64{5, 5, 5}); !near(f.A, 0) || !near(f.B, 5) {
		t.Errorf("flat: %+v", f)
	}
	if _, err := LinearFit([]float64{1, 1}, []float64{1, 2}); !errors.Is(err, ErrDegenerateFit) {
		t.Errorf("one distinct x: err %v, want ErrDegenerateFit", err)
	}
	if _, err := LinearFit(nil, nil); !errors.Is(err, ErrDegenerateFit) {
		t.Errorf("no samples: err %v", err)
	}
	if _, err := LinearFit([]float64{1}, nil); err == nil {
		t.Error("mismatched lengths accepted")
	}
}
