package results

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
)

// Sweep is a set of figures measured at several values of one timing-model
// knob (x), with repeats at every value, and a least-squares fit of one
// figure against x. Safe for concurrent use.
type Sweep struct {
	// Knob names the model field swept, XUnit its unit ("ms").
	Knob  string `json:"knob"`
	XUnit string `json:"xUnit"`
	// Points are in increasing x.
	Points []SweepPoint `json:"points"`
	// Fitted is the figure the fit is of, over every sample.
	Fitted string `json:"fitted,omitempty"`
	Fit    *Fit   `json:"fit,omitempty"`
	// FitX and FitY are the samples the fit used, in order (the fit's
	// residuals are in the same order).
	FitX []float64 `json:"fitX,omitempty"`
	FitY []float64 `json:"fitY,omitempty"`

	mu      sync.Mutex
	samples map[float64]map[string][]float64
}

// SweepPoint is every figure's distribution at one x.
type SweepPoint struct {
	X       float64          `json:"x"`
	Figures map[string]Stats `json:"figures"`
}

// NewSweep starts a sweep over knob, measured in unit.
func NewSweep(knob, unit string) *Sweep {
	return &Sweep{Knob: knob, XUnit: unit, samples: map[float64]map[string][]float64{}}
}

// Add records one repeat's figures at x.
func (s *Sweep) Add(x float64, figures map[string]float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.samples[x]
	if m == nil {
		m = map[string][]float64{}
		s.samples[x] = m
	}
	for k, v := range figures {
		m[k] = append(m[k], v)
	}
	s.rebuild()
}

// Samples is how many repeats were recorded in all.
func (s *Sweep) Samples() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.Points {
		for _, st := range p.Figures {
			n += st.N
			break
		}
	}
	return n
}

func (s *Sweep) rebuild() {
	xs := make([]float64, 0, len(s.samples))
	for x := range s.samples {
		xs = append(xs, x)
	}
	sort.Float64s(xs)
	s.Points = s.Points[:0]
	for _, x := range xs {
		p := SweepPoint{X: x, Figures: map[string]Stats{}}
		for k, v := range s.samples[x] {
			p.Figures[k] = Summarize(v)
		}
		s.Points = append(s.Points, p)
	}
}

// FitFigure fits figure ≈ a·x + b over every sample of it and keeps the fit.
func (s *Sweep) FitFigure(figure string) (Fit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var x, y []float64
	for _, p := range s.Points {
		for _, v := range p.Figures[figure].Samples {
			x, y = append(x, p.X), append(y, v)
		}
	}
	f, err := LinearFit(x, y)
	if err != nil {
		return f, fmt.Errorf("sweep of %s over %s: %w", figure, s.Knob, err)
	}
	s.Fitted, s.Fit, s.FitX, s.FitY = figure, &f, x, y
	return f, nil
}

// Point returns the point at x (false if none).
func (s *Sweep) Point(x float64) (SweepPoint, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.Points {
		if p.X == x {
			return p, true
		}
	}
	return SweepPoint{}, false
}

// Table renders the sweep for people: one row per x, one column group per
// figure (median, min–max), then the fit with its residuals per x.
func (s *Sweep) Table(figures ...string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "%s %s\tn\t", s.Knob, s.XUnit)
	for _, f := range figures {
		fmt.Fprintf(w, "%s median\t[min–max]\tp95\t", f)
	}
	fmt.Fprintln(w)
	for _, p := range s.Points {
		n := 0
		for _, f := range figures {
			n = max(n, p.Figures[f].N)
		}
		fmt.Fprintf(w, "%.0f\t%d\t", p.X, n)
		for _, f := range figures {
			st := p.Figures[f]
			fmt.Fprintf(w, "%.1f\t[%.1f–%.1f]\t%.1f\t", st.Median, st.Min, st.Max, st.P95)
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	if s.Fit != nil {
		fmt.Fprintf(&b, "fit: %s ≈ %.3f·%s %+.1f %s  (R² %.4f, residual RMS %.1f, max |residual| %.1f; n=%d)\n",
			s.Fitted, s.Fit.A, s.Knob, s.Fit.B, s.XUnit, s.Fit.R2, s.Fit.RMS, s.Fit.MaxAbsResidual, len(s.FitX))
		byX := map[float64][]string{}
		var xs []float64
		for i, x := range s.FitX {
			if _, ok := byX[x]; !ok {
				xs = append(xs, x)
			}
			byX[x] = append(byX[x], fmt.Sprintf("%+.1f", s.Fit.Residuals[i]))
		}
		for _, x := range xs {
			fmt.Fprintf(&b, "  residuals at %.0f %s: %s\n", x, s.XUnit, strings.Join(byX[x], " "))
		}
	}
	return b.String()
}
