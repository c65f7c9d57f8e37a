package scenarios_test

// Claim (design §4): the live-change path "is the path with the gap ... The
// gap is the length of a Felix restart". A gap measured at one restart time
// says nothing about that claim; a gap measured at several does. This sweep
// runs the BIRD → programmer change at several programmer restart delays D
// (the timing model's ProgrammerStartupDelay, implemented by the programmer
// process), with repeats at each, and fits gap ≈ a·D + b over every sample.
// "About one restart long" becomes: a is 1 within a tolerance derived only
// from stated quantities (the delays swept, the probe interval, the timing
// model's confd latency: judge.SlopeTolerance), |b| is within a budget of
// what else moves the gap, and at every D longer than confd's stated
// reaction there is a gap (probes lost, a window without a route). The slope
// tolerance never comes from the run's own measured overheads: a programmer
// that got slower would otherwise widen its own allowance.
//
// The reverse direction (programmer → BIRD) runs at the same delays and is
// reported, not fitted: its window is set by BIRD's kernel scan, not by the
// restart (see liveconfig_test.go), and is held to that bound.
//
// Reduced by default (CI: 500 ms and 1.5 s, 3 runs each); the full sweep is
// BIRDCAGE_DEPTH=sweep or full (0, 200 ms, 1 s, 3 s; 5 runs each). BIRDCAGE_SWEEP_DELAYS
// and BIRDCAGE_REPEAT override the delays and the runs.

import (
	"fmt"
	"math"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/timing"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// sweepPlan is the delays and runs per delay the environment asks for.
func sweepPlan() ([]time.Duration, int, error) {
	// Reduced: two delays, both past confd's reaction natively, so the fit
	// is of the relation itself (no bend at the origin) and CI stays short.
	delays, runs := "500ms,1500ms", 3
	if scenariotest.Machine.Stalls() {
		// Under TCG the stated spread carries two 150 ms stalls: a wider
		// span keeps the slope's tolerance (spread / span) judgeable.
		delays = "500ms,2500ms"
	}
	if scenariotest.Config.Full(env.DepthSweep) {
		delays, runs = "0,200ms,1s,3s", 5
	}
	ds, err := timing.ParseDelays(delays)
	if err != nil {
		return nil, 0, err
	}
	if len(scenariotest.Config.SweepDelays) > 0 {
		ds = scenariotest.Config.SweepDelays
	}
	return ds, results.Repeats(scenariotest.Config.Repeat, runs), nil
}

// sweepBudget is what, besides the restart delay, moves one sample's gap:
// the probe gap's quantisation (up to two intervals), confd's reaction
// (model latency plus the measured render-and-configure), and the restart's
// own overhead beyond D (exit → first program − D, measured). It bounds
// nothing any more, being this run's own: the slope's tolerance is
// judge.SlopeTolerance and the intercept's bound
// SweepStated.InterceptBoundMs, both of stated quantities; the budget is
// reported (budgetMs, and over the span as slopeToleranceMeasured) so a
// programmer or confd that gets slower shows.
type sweepBudget struct {
	ProbeIntervalMs, ConfdLatencyMs, ConfdReactMs, RestartOverheadMs float64
}

func (b sweepBudget) Ms() float64 {
	return 2*b.ProbeIntervalMs + b.ConfdLatencyMs + b.ConfdReactMs + b.RestartOverheadMs
}

var _ = Describe("Live change gap as a function of the programmer's restart time", Label("liveconfig", "sweep", "timing", "claim13"), func() {
	delays, runs, planErr := sweepPlan()
	for _, tc := range []struct {
		topology string
		label    string
		from, to ownership
	}{
		{"noencap", "noencap", noEncapByBIRD, noEncapByProgrammer},
		{"noencap", "noencap", noEncapByProgrammer, noEncapByBIRD},
		{"ipip", "ipip", ipipByBIRD, ipipByProgrammer},
	} {
		toProgrammer := tc.to.owner == judge.ByProgrammer
		dir := map[bool]string{true: "BIRD → programmer", false: "programmer → BIRD"}[toProgrammer]
		Describe(fmt.Sprintf("on %s, %s", tc.topology, dir), Ordered, Label(tc.label), func() {
			if planErr != nil {
				It("has a valid sweep plan", func() { Fail(planErr.Error()) })
				return
			}
			sweep := results.NewSweep("programmerStartupDelay", "ms")
			noRoute := results.NewSweep("programmerStartupDelay", "ms")
			var budget sweepBudget
			var stated judge.SweepStated
			var model timing.Model
			var allHandovers judge.Handovers
			base, err := timing.FromEnv(scenariotest.Config)

			for _, d := range delays {
				for run := 1; run <= runs; run++ {
					It(fmt.Sprintf("restart delay %s, run %d of %d", d, run, runs), func(ctx SpecContext) {
						Expect(err).NotTo(HaveOccurred(), "timing model from the environment")
						m := base
						m.ProgrammerStartupDelay = d
						m.Name += fmt.Sprintf(", sweep point %s", d)
						model = base
						model.Name += " (ProgrammerStartupDelay swept)"
						lc := liveChange(ctx, tc.topology, tc.from, tc.to, liveOptions{timing: &m})
						res := lc.res
						res.Name = fmt.Sprintf("live change sweep on %s: %s → %s, restart delay %s", tc.topology, tc.from.owner, tc.to.owner, d)
						x := monoclock.Ms(d)
						figs := map[string]float64{
							"longestProbeGapMs":  res.Figures["longestProbeGapMs"],
							"lostProbes":         res.Figures["lostProbes"],
							"senderPauseInGapMs": res.Figures["senderPauseInGapMs"],
							"restartMsMax":       res.Figures["programmerRestartMsMax"],
							"lateProbes":         res.Figures["lateProbes"],
						}
						if !toProgrammer {
							ord := lc.handovers.Orderings()
							figs["birdTriedFirst"] = float64(ord[judge.BIRDTriedFirst])
							figs["birdWroteAfterDelete"] = float64(ord[judge.BIRDWroteAfterDelete])
							figs["programmerDeletedFirst"] = float64(ord[judge.ProgrammerDeletedFirst])
							figs["scanPredictionErrorMsMax"] = 0
							if st, ok := res.Samples["noRouteWindowMinusScanPredictionMs"]; ok {
								figs["scanPredictionErrorMsMax"] = max(math.Abs(st.Min), math.Abs(st.Max))
							}
							allHandovers = append(allHandovers, lc.handovers...)
						}
						sweep.Add(x, figs)
						noRoute.Add(x, map[string]float64{"longestNoRouteWindowMs": res.Figures["longestNoRouteWindowMs"]})
						budget.ProbeIntervalMs = 1000 / float64(lc.rep.Rate)
						stated = judge.SweepStated{ProbeInterval: time.Second / time.Duration(lc.rep.Rate), ConfdLatency: m.ConfdLatency,
							PlatformStall: judge.StatedPlatformStall(scenariotest.Machine.Stalls())}
						budget.ConfdLatencyMs = monoclock.Ms(m.ConfdLatency)
						budget.ConfdReactMs = max(budget.ConfdReactMs, lc.confdReactMs)
						budget.RestartOverheadMs = max(budget.RestartOverheadMs, res.Samples["programmerToFirstProgramMs"].Max-x)
						scenariotest.Record(fmt.Sprintf("sweep point on %s, %s: restart delay %s, run %d/%d (probe gap %.1f ms, sender pause in it %.1f ms)",
							tc.topology, dir, d, run, runs, res.Figures["longestProbeGapMs"], res.Figures["senderPauseInGapMs"]),
							results.GapTable(lc.rep)+lc.handovers.Table(), res)
					})
				}
			}

			if !toProgrammer {
				It("is bounded by BIRD's kernel scan, whatever the restart time: BIRD re-adds at its first scan after the programmer's delete", func() {
					if sweep.Samples() == 0 {
						Skip("no sweep point ran (their topology is not available here)")
					}
					scan := monoclock.Ms(model.BIRDScanTime)
					bound := toBIRDBoundMs(model)
					res := results.ScenarioResult{Name: fmt.Sprintf("live change sweep on %s: %s → %s (summary)", tc.topology, tc.from.owner, tc.to.owner),
						Topology: tc.topology, Passed: true, Timing: &model, Sweep: noRoute, Samples: map[string]results.Stats{}}
					res.Figure("birdScanTimeMs", scan, results.KindSize) // a setting
					res.Figure("boundMs", bound, results.KindSize)
					for o := range allHandovers.Orderings() {
						res.Samples["noRouteWindowMs: "+string(o)] = results.Summarize(allHandovers.Windows(o))
					}
					// What explains the windows is read from the handovers,
					// not assumed: the scan only where BIRD's route shares
					// the programmer's kernel key.
					ord := allHandovers.Orderings()
					why := "not linear in the restart delay"
					if ord[judge.BIRDTriedFirst] > 0 {
						why += fmt.Sprintf("; %d handovers on one kernel key: BIRD's write is refused until the programmer deletes, "+
							"and it re-adds at its next kernel scan, the scans counting from its reconfigure — a sawtooth of period scan time", ord[judge.BIRDTriedFirst])
					}
					if n := ord[judge.BIRDWroteAfterDelete]; n > 0 {
						why += fmt.Sprintf("; %d handovers with BIRD's route at another metric than the programmer's: no write refused, BIRD's route "+
							"came soon after the delete, not at a scan (its best path until then was a peer's re-advertisement of the programmer's route, docs/conformance.md)", n)
					}
					res.Notes = append(res.Notes, why)
					scenariotest.Record(fmt.Sprintf("live change window vs programmer restart delay on %s, %s (%d delays × %d runs; BIRD scan %s)",
						tc.topology, dir, len(delays), runs, model.BIRDScanTime),
						sweep.Table("longestProbeGapMs", "birdTriedFirst", "birdWroteAfterDelete", "programmerDeletedFirst", "scanPredictionErrorMsMax")+
							"\nwindows without a route:\n"+noRoute.Table("longestNoRouteWindowMs")+"\n"+res.Notes[0]+"\n", res)
					for _, h := range allHandovers {
						Expect(h.WindowMs).To(BeNumerically("<=", bound),
							"%s: %s was without a route for %.1f ms (%s), longer than BIRD's scan time %.0f ms or confd's reaction allow",
							h.Node, h.Block, h.WindowMs, h.Ordering, scan)
					}
				})
				return
			}

			It("has a gap about one restart long: the fitted slope is 1 within the budget, and every delay past confd's reaction opens a gap", func() {
				if sweep.Samples() == 0 {
					Skip("no sweep point ran (their topology is not available here)")
				}
				Expect(len(delays)).To(BeNumerically(">=", 2), "a fit needs two delays; $%s has %d", env.SweepDelays, len(delays))
				fit, err := sweep.FitFigure("longestProbeGapMs")
				Expect(err).NotTo(HaveOccurred())
				nrFit, err := noRoute.FitFigure("longestNoRouteWindowMs")
				Expect(err).NotTo(HaveOccurred())
				lo, hi := delays[0], delays[0]
				for _, d := range delays {
					lo, hi = min(lo, d), max(hi, d)
				}
				span := monoclock.Ms(hi - lo)
				slope, slopeErr := judge.JudgeSlope(fit, sweep.FitX, stated)
				tol := slope.Tolerance
				measuredTol := budget.Ms() / span // the old, self-calibrating rule: reported only

				// Below confd's reaction the programmer is back before BIRD
				// withdraws and the gap is 0, not negative: the line bends
				// there. The fit over the delays past it is the relation
				// itself (reported; asserted when there are two such delays).
				// "Past it" is stated too: the configured latency plus the
				// stated spread, not the reaction this run measured.
				react := monoclock.Ms(stated.ConfdLatency) + stated.SpreadMs()
				var ax, ay []float64
				aboveDelays := 0
				for _, p := range sweep.Points {
					if p.X > react {
						aboveDelays++
						for _, v := range p.Figures["longestProbeGapMs"].Samples {
							ax, ay = append(ax, p.X), append(ay, v)
						}
					}
				}
				above, aboveErr := results.LinearFit(ax, ay)

				res := results.ScenarioResult{Name: fmt.Sprintf("live change sweep on %s: %s → %s (fit)", tc.topology, tc.from.owner, tc.to.owner),
					Topology: tc.topology, Passed: true, Timing: &model, Sweep: sweep}
				// The fits' parameters and bounds are sizes (never judged); their
				// intercepts and residuals, in ms, durations (a ratio judges them).
				for name, v := range map[string]float64{"fitSlope": fit.A, "fitR2": fit.R2, "slopeTolerance": tol, "slopeSpreadMs": slope.SpreadMs,
					"slopeToleranceMeasured": measuredTol, "budgetMs": budget.Ms(), "interceptBoundMs": stated.InterceptBoundMs(),
					"noRouteFitSlope": nrFit.A, "noRouteFitR2": nrFit.R2} {
					res.Figure(name, v, results.KindSize)
				}
				for name, v := range map[string]float64{"fitInterceptMs": fit.B, "fitResidualRMSMs": fit.RMS, "fitMaxAbsResidualMs": fit.MaxAbsResidual,
					"noRouteFitInterceptMs": nrFit.B} {
					res.Figure(name, v, results.KindDuration)
				}
				res.Notes = append(res.Notes,
					fmt.Sprintf("slope tolerance ±%.3f, stated: spread 2 × probe interval %s + confd latency %s = %.1f ms over the delays swept (span %.0f ms); "+
						"intercept bound (stated) %.1f ms; the measured budget, reported only: 2 × probe interval %.1f ms + confd latency %.1f ms + confd render/configure %.1f ms + restart overhead %.1f ms = %.1f ms, "+
						"which over the span would have been a slope tolerance of ±%.3f",
						tol, stated.ProbeInterval, stated.ConfdLatency, slope.SpreadMs, span, stated.InterceptBoundMs(),
						budget.ProbeIntervalMs, budget.ConfdLatencyMs, budget.ConfdReactMs, budget.RestartOverheadMs, budget.Ms(), measuredTol),
					"no-route window fit: "+nrFit.String())
				aboveLine := fmt.Sprintf("fit over the delays past confd's stated reaction (%.0f ms): fewer than two such delays", react)
				if aboveErr == nil && aboveDelays >= 2 {
					res.Figure("fitAboveReactSlope", above.A, results.KindSize)
					res.Figure("fitAboveReactInterceptMs", above.B, results.KindDuration)
					res.Figure("fitAboveReactResidualRMSMs", above.RMS, results.KindDuration)
					aboveLine = fmt.Sprintf("fit over the delays past confd's stated reaction (%.0f ms): gap ≈ %.3f·D %+.1f ms (R² %.4f, residual RMS %.1f, max |residual| %.1f)",
						react, above.A, above.B, above.R2, above.RMS, above.MaxAbsResidual)
				}
				res.Notes = append(res.Notes, aboveLine)
				scenariotest.Record(fmt.Sprintf("live change gap vs programmer restart delay on %s (%d delays × %d runs): gap ≈ %.3f·D %+.1f ms, tolerance ±%.3f",
					tc.topology, len(delays), runs, fit.A, fit.B, tol),
					sweep.Table("longestProbeGapMs", "lostProbes", "senderPauseInGapMs", "restartMsMax")+
						"\nwindows without a route:\n"+noRoute.Table("longestNoRouteWindowMs")+"\n"+res.Notes[0]+"\n"+aboveLine+"\n", res)

				// The claim, as the fit: slope 1 within the stated
				// tolerance, intercept within the stated bound.
				Expect(slopeErr).NotTo(HaveOccurred(), "the fitted slope of the probe gap against the restart delay")
				Expect(math.Abs(fit.B)).To(BeNumerically("<=", stated.InterceptBoundMs()),
					"gap ≈ %.3f·D %+.1f ms: the intercept is outside the stated %.1f ms (2 × probe interval %s + confd latency %s + one process start %s + 2 × platform stall %s)",
					fit.A, fit.B, stated.InterceptBoundMs(), stated.ProbeInterval, stated.ConfdLatency, judge.ProcessStartAllowance, stated.PlatformStall)
				if aboveErr == nil && aboveDelays >= 2 {
					_, err := judge.JudgeSlope(above, ax, stated)
					Expect(err).NotTo(HaveOccurred(), "past confd's stated reaction (%.0f ms), the fitted slope", react)
				}
				// A gap at every delay longer than confd's reaction, and
				// not the sender's doing.
				for _, p := range sweep.Points {
					if p.X <= react {
						continue
					}
					gaps, lost, pauses := p.Figures["longestProbeGapMs"], p.Figures["lostProbes"], p.Figures["senderPauseInGapMs"]
					Expect(lost.Min).To(BeNumerically(">", 0), "restart delay %.0f ms: a run lost no probes (lost %v)", p.X, lost.Samples)
					nr, _ := noRoute.Point(p.X)
					Expect(nr.Figures["longestNoRouteWindowMs"].Min).To(BeNumerically(">", 0),
						"restart delay %.0f ms: a run had no window without a route (%v)", p.X, nr.Figures["longestNoRouteWindowMs"].Samples)
					for i, g := range gaps.Samples {
						Expect(pauses.Samples[i]).To(BeNumerically("<", g/2),
							"restart delay %.0f ms, run %d: the sender itself paused %.1f ms of a %.1f ms gap", p.X, i+1, pauses.Samples[i], g)
					}
				}
			})
		})
	}
})
