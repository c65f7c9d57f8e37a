package judge

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/machine"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/report/results"
)

// synthSweep builds the samples of a restart-delay sweep: runs samples at
// each delay (ms), the gap given by gap(delay, run).
func synthSweep(delays []float64, runs int, gap func(d float64, run int) float64) (xs []float64, fit results.Fit) {
	s := results.NewSweep("programmerStartupDelay", "ms")
	for _, d := range delays {
		for r := 0; r < runs; r++ {
			s.Add(d, map[string]float64{"longestProbeGapMs": gap(d, r)})
		}
	}
	f, err := s.FitFigure("longestProbeGapMs")
	if err != nil {
		panic(err)
	}
	return s.FitX, f
}

var (
	// Native: 1 kHz probes, the realistic model's 100 ms confd latency.
	nativeStated = SweepStated{ProbeInterval: time.Millisecond, ConfdLatency: 100 * time.Millisecond}
	// VM-like: slower probes and a confd latency stated three times
	// larger; still from stated quantities, so a slow guest does not widen
	// the tolerance by being slow.
	vmStated = SweepStated{ProbeInterval: 20 * time.Millisecond, ConfdLatency: 300 * time.Millisecond}

	reducedDelays = []float64{500, 1500}
	fullDelays    = []float64{0, 200, 1000, 3000}
)

func TestSweepSlopeFailsAGapIndependentOfTheDelay(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stated SweepStated
		delays []float64
		runs   int
	}{
		{"native reduced", nativeStated, reducedDelays, 3},
		{"native full", nativeStated, fullDelays, 5},
		{"vm reduced", vmStated, reducedDelays, 3},
		{"vm full", vmStated, fullDelays, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			// A programmer that is back after a fixed ~700 ms whatever D
			// is (plus quantisation jitter): the gap does not follow D.
			xs, fit := synthSweep(tc.delays, tc.runs, func(float64, int) float64 {
				return 700 + rng.Float64()*2*monoclock.Ms(int64(tc.stated.ProbeInterval))
			})
			v, err := JudgeSlope(fit, xs, tc.stated)
			if err == nil {
				t.Fatalf("slope %.3f passed with tolerance %.3f: a gap independent of the restart delay must fail", v.Slope, v.Tolerance)
			}
			if errors.Is(err, ErrSweepUnjudgeable) {
				t.Fatalf("unjudgeable (%v): the plan's delays should judge a %v spread", err, tc.stated)
			}
			t.Logf("slope %.3f, tolerance %.3f: %v", v.Slope, v.Tolerance, err)
		})
	}
}

func TestSweepSlopePassesOneRestartLong(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stated SweepStated
		delays []float64
		runs   int
	}{
		{"native reduced", nativeStated, reducedDelays, 3},
		{"native full", nativeStated, fullDelays, 5},
		{"vm reduced", vmStated, reducedDelays, 3},
		{"vm full", vmStated, fullDelays, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			lat, q := monoclock.Ms(int64(tc.stated.ConfdLatency)), 2*monoclock.Ms(int64(tc.stated.ProbeInterval))
			// Slope 1 with every stated effect at its worst: BIRD withdraws
			// a confd latency after the change (so short delays bend to
			// 0), a fixed restart overhead of 60 ms (intercept only), the
			// reaction jittering over the whole stated latency, and the
			// probe quantisation.
			xs, fit := synthSweep(tc.delays, tc.runs, func(d float64, _ int) float64 {
				return max(0, d+60-lat-rng.Float64()*lat*0.5) + rng.Float64()*q
			})
			v, err := JudgeSlope(fit, xs, tc.stated)
			if err != nil {
				t.Fatalf("a gap one restart long failed: %v", err)
			}
			t.Logf("slope %.3f (intercept %+.1f ms), tolerance %.3f", v.Slope, fit.B, v.Tolerance)
		})
	}
}

// A programmer whose restart grows with D beyond D itself (1.5·D) fails:
// its slowness is not in the tolerance.
func TestSweepSlopeFailsAProgrammerSlowerThanItsDelay(t *testing.T) {
	xs, fit := synthSweep(reducedDelays, 3, func(d float64, _ int) float64 { return 1.5*d + 70 })
	if v, err := JudgeSlope(fit, xs, vmStated); err == nil {
		t.Fatalf("slope %.3f passed with tolerance %.3f", v.Slope, v.Tolerance)
	}
}

// The bound is exact: the worst-case errors reach it, and never exceed it,
// for two delays and for an uneven set of three.
func TestSlopeToleranceIsTheWorstCase(t *testing.T) {
	const s = 100.0
	for _, xs := range [][]float64{
		{500, 500, 500, 1500, 1500, 1500},
		{0, 900, 1000},
		{0, 0, 200, 200, 1000, 3000, 3000},
	} {
		tol, err := SlopeTolerance(xs, s)
		if err != nil {
			t.Fatal(err)
		}
		var mx float64
		for _, x := range xs {
			mx += x
		}
		mx /= float64(len(xs))
		worst := make([]float64, len(xs))
		for i, x := range xs {
			worst[i] = x + 40
			if x > mx {
				worst[i] += s
			}
		}
		f, _ := results.LinearFit(xs, worst)
		if math.Abs(math.Abs(f.A-1)-tol) > 1e-9 {
			t.Errorf("xs %v: worst-case slope %.6f, tolerance %.6f: the bound is not reached", xs, f.A, tol)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		for k := 0; k < 2000; k++ {
			y := make([]float64, len(xs))
			for i, x := range xs {
				y[i] = x - 70 + rng.Float64()*s
			}
			f, _ := results.LinearFit(xs, y)
			if math.Abs(f.A-1) > tol+1e-9 {
				t.Fatalf("xs %v: slope %.6f outside the bound %.6f", xs, f.A, tol)
			}
		}
	}
	if tol, _ := SlopeTolerance([]float64{500, 1500}, s); math.Abs(tol-s/1000) > 1e-12 {
		t.Errorf("two delays: tolerance %v, want spread/span %v", tol, s/1000)
	}
}

// Delays too close together for the stated spread are unjudgeable, not a
// pass: a 300 ms span cannot tell slope 0 from slope 1 with a 340 ms spread.
func TestSweepSlopeUnjudgeableWhenTheDelaysSpanTooLittle(t *testing.T) {
	xs, fit := synthSweep([]float64{500, 800}, 3, func(d float64, _ int) float64 { return d })
	_, err := JudgeSlope(fit, xs, vmStated)
	if !errors.Is(err, ErrSweepUnjudgeable) {
		t.Fatalf("got %v, want ErrSweepUnjudgeable", err)
	}
}

// Under TCG the stated spread carries the platform's stated stall at both
// ends; natively it carries none. Still stated, never measured.
func TestSweepSpreadCarriesTheStatedPlatformStall(t *testing.T) {
	if StatedPlatformStall(machine.Profile{}.Stalls()) != 0 {
		t.Fatal("natively the stated stall must be 0")
	}
	s := SweepStated{ProbeInterval: 5 * time.Millisecond, ConfdLatency: 100 * time.Millisecond, PlatformStall: StatedPlatformStall(machine.Profile{Accel: "tcg"}.Stalls())}
	if got := s.SpreadMs(); got != 2*5+100+2*150 {
		t.Fatalf("TCG spread %.1f ms, want %d", got, 2*5+100+2*150)
	}
	// The VM's reduced plan (500 ms, 2500 ms) keeps it judgeable, and a gap
	// independent of the delay still fails there.
	xs := []float64{500, 500, 500, 2500, 2500, 2500}
	flat, _ := results.LinearFit(xs, []float64{900, 950, 920, 930, 910, 940})
	if _, err := JudgeSlope(flat, xs, s); err == nil || errors.Is(err, ErrSweepUnjudgeable) {
		t.Errorf("a delay-independent gap under TCG: %v, want a slope failure", err)
	}
	one, _ := results.LinearFit(xs, []float64{600, 700, 650, 2620, 2700, 2650})
	if _, err := JudgeSlope(one, xs, s); err != nil {
		t.Errorf("slope 1 under TCG: %v", err)
	}
}

// The intercept bound is the stated quantities' sum, nothing measured: a
// native 1 kHz run with the realistic model's 100 ms confd latency allows
// 2 + 100 + 150 ms; a stalling platform adds a stall at each end.
func TestInterceptBoundIsStated(t *testing.T) {
	if got := nativeStated.InterceptBoundMs(); got != 252 {
		t.Errorf("native intercept bound %.1f ms, want 252", got)
	}
	s := vmStated
	s.PlatformStall = TCGStall
	if got, want := s.InterceptBoundMs(), 2*20+300+150+2*150.0; got != want {
		t.Errorf("TCG intercept bound %.1f ms, want %.1f", got, want)
	}
}
