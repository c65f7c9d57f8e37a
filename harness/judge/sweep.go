package judge

import (
	"errors"
	"fmt"
	"time"

	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/report/results"
)

// SweepStated is what a restart-delay sweep's verdict may depend on: the
// quantities the run was told (the probe interval, the timing model's
// ConfdLatency, the delays D it swept), never ones it measured. A tolerance
// built from the run's own confd reaction or the programmer's own restart
// overhead grows when the programmer gets slower, so a regression would
// widen its own allowance.
type SweepStated struct {
	ProbeInterval time.Duration // 1 / the probe rate per flow
	ConfdLatency  time.Duration // TimingModel.ConfdLatency
	// PlatformStall is the longest stall the platform is stated to put on
	// any one event (0 natively; TCGStall in a QEMU guest under TCG): a
	// property of the machine written down beforehand, not this run's.
	PlatformStall time.Duration
}

// TCGStall is the stall stated for a guest under QEMU TCG: the whole guest
// stops for ~100 ms while a process or container starts, up to 166 ms seen
// on one flow (notes/platform.md, ci/vm/README.md); 150 ms bounds a single
// stall, and a sample's gap can take one at each end.
const TCGStall = 150 * time.Millisecond

// StatedPlatformStall is the stall stated for a platform: TCGStall where it
// stalls (machine.Profile.Stalls), else 0.
func StatedPlatformStall(stalls bool) time.Duration {
	if stalls {
		return TCGStall
	}
	return 0
}

// SpreadMs is how much the part of a sample's gap that is not D may differ
// from one sample to another, from the stated quantities alone:
//
//   - probe quantisation: a measured gap runs from the last probe before
//     the outage to the first after it, so it exceeds the outage by between
//     0 and 2 probe intervals;
//
//   - confd's reaction: the gap opens when BIRD withdraws, ConfdLatency
//     after the change plus a render and configure. Allowing the whole
//     stated latency as the variation bounds both the jitter of that
//     reaction and the bend at small D (a delay shorter than the reaction
//     has gap 0, not D + c with c down to −ConfdLatency).
//
//   - the platform's stated stall, at each end of the gap (the withdrawal
//     that opens it and the programmer's write that closes it can each be
//     held up by one).
//
// The programmer's fixed overhead beyond D is the same at every D: it moves
// the intercept, never the slope, and so is not in the spread.
func (s SweepStated) SpreadMs() float64 {
	return 2*monoclock.Ms(int64(s.ProbeInterval)) + monoclock.Ms(int64(s.ConfdLatency)) + 2*monoclock.Ms(int64(s.PlatformStall))
}

// ProcessStartAllowance is what one process start may add beyond the
// timing model's stated delays: confd's render and BIRD's configure after
// the stated latency, or the programmer's exec, first dump and first write
// after its startup delay D. It is stated, not measured, so a programmer
// (or confd) that gets slower fails the intercept instead of widening its
// own bound (CI measured 58–93 ms and 57–63 ms on 2026-12-02).
const ProcessStartAllowance = 150 * time.Millisecond

// InterceptBoundMs bounds |c| in a sample's gap g = D + c from the stated
// quantities alone. c is the programmer's overhead beyond D (0 ..
// ProcessStartAllowance) less BIRD's withdrawal delay (ConfdLatency plus
// 0 .. ProcessStartAllowance), so c lies in [−(ConfdLatency +
// ProcessStartAllowance), ProcessStartAllowance]; the probe quantisation
// adds up to two intervals and the platform one stall at each end.
func (s SweepStated) InterceptBoundMs() float64 {
	return 2*monoclock.Ms(int64(s.ProbeInterval)) + monoclock.Ms(int64(s.ConfdLatency)) + monoclock.Ms(int64(ProcessStartAllowance)) + 2*monoclock.Ms(int64(s.PlatformStall))
}

// MaxJudgeableSlopeTolerance is the widest slope tolerance at which a sweep
// still tells a gap one restart long (slope 1) from one half as dependent
// on the restart: past it the sweep's delays span too little for the
// stated spread, and the check is unjudgeable, not passed.
const MaxJudgeableSlopeTolerance = 0.5

// ErrSweepUnjudgeable: the swept delays span too little, for the stated
// spread, to tell slope 1 from slope ≤ 1/2.
var ErrSweepUnjudgeable = errors.New("unjudgeable sweep")

// SlopeTolerance is the largest |a − 1| a least-squares fit can show over
// samples at xs (ms, one entry per sample, repeats included) whose gap is
// g_i = x_i + c + e_i, c any constant and every e_i in [0, spreadMs].
//
// Derivation: the fitted slope is a = Σ w_i g_i with w_i = (x_i − x̄)/Sxx,
// Sxx = Σ (x_i − x̄)². Since Σ w_i = 0 and Σ w_i x_i = 1, a − 1 = Σ w_i e_i:
// c drops out. Over e_i in [0, s] that sum is largest with e_i = s where
// w_i > 0 and 0 elsewhere, and Σ w_i = 0 makes the smallest its negative,
// so |a − 1| ≤ s · Σ_{w_i > 0} w_i, and the bound is reached. With two
// distinct delays (any repeats) it is s / (x_max − x_min); with more it can
// be a little more than that.
func SlopeTolerance(xs []float64, spreadMs float64) (float64, error) {
	if len(xs) == 0 {
		return 0, results.ErrDegenerateFit
	}
	var mx float64
	for _, x := range xs {
		mx += x
	}
	mx /= float64(len(xs))
	var sxx, pos float64
	for _, x := range xs {
		sxx += (x - mx) * (x - mx)
		if x > mx {
			pos += x - mx
		}
	}
	if sxx == 0 {
		return 0, results.ErrDegenerateFit
	}
	return spreadMs * pos / sxx, nil
}

// SweepSlopeVerdict is a fitted slope judged against the stated tolerance.
type SweepSlopeVerdict struct {
	Slope, Tolerance, SpreadMs float64
}

// JudgeSlope fits nothing: it judges fit (of gap against D over the
// samples at xs, in ms) against the tolerance from stated. The error says
// why the slope is not 1 within it, or wraps ErrSweepUnjudgeable when the
// tolerance is too wide to mean anything.
func JudgeSlope(fit results.Fit, xs []float64, stated SweepStated) (SweepSlopeVerdict, error) {
	v := SweepSlopeVerdict{Slope: fit.A, SpreadMs: stated.SpreadMs()}
	tol, err := SlopeTolerance(xs, v.SpreadMs)
	if err != nil {
		return v, err
	}
	v.Tolerance = tol
	if tol > MaxJudgeableSlopeTolerance {
		return v, fmt.Errorf("%w: the delays swept span too little for a %.1f ms spread (2 × probe interval %s + confd latency %s + 2 × platform stall %s): "+
			"slope tolerance %.3f is over %.1f, so a gap independent of the restart could not be told from one restart long; sweep longer delays",
			ErrSweepUnjudgeable, v.SpreadMs, stated.ProbeInterval, stated.ConfdLatency, stated.PlatformStall, tol, MaxJudgeableSlopeTolerance)
	}
	if d := fit.A - 1; d > tol || d < -tol {
		return v, fmt.Errorf("gap ≈ %.3f·D %+.1f ms: a slope this far from 1 means the gap is not one restart long "+
			"(tolerance ±%.3f from a %.1f ms spread: 2 × probe interval %s + confd latency %s + 2 × platform stall %s, over the delays swept)",
			fit.A, fit.B, tol, v.SpreadMs, stated.ProbeInterval, stated.ConfdLatency, stated.PlatformStall)
	}
	return v, nil
}
