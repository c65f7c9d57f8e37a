package scenarios_test

// The suite's JUnit report (--ginkgo.junit-report) carries every
// scenario's figures as properties of its test case, so CI systems that
// read JUnit can chart and gate on them: Ginkgo writes each report entry as
// a <property name=... value=JSON/>. The entries are invisible on the
// console (the table report() prints is the console's view).

import (
	"sort"

	. "github.com/onsi/ginkgo/v2"

	"github.com/birdcage/birdcage/report/results"
)

// JUnit property names: figurePrefix+figure, samplesPrefix+figure, and the
// probe totals.
const (
	figurePrefix  = "birdcage.figure."
	samplesPrefix = "birdcage.samples."
	probesPrefix  = "birdcage.probes."
)

// distribution is a figure's samples as a JUnit property (without every
// sample: a property is one attribute).
type distribution struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	P95    float64 `json:"p95"`
	Max    float64 `json:"max"`
}

// addFigureEntries adds res's figures, distributions and probe totals as
// report entries of the running spec.
func addFigureEntries(res results.ScenarioResult) {
	names := make([]string, 0, len(res.Figures))
	for k := range res.Figures {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		AddReportEntry(figurePrefix+k, res.Figures[k], ReportEntryVisibilityNever)
	}
	names = names[:0]
	for k := range res.Samples {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		st := res.Samples[k]
		AddReportEntry(samplesPrefix+k, distribution{N: st.N, Min: st.Min, Median: st.Median, P95: st.P95, Max: st.Max}, ReportEntryVisibilityNever)
	}
	if p := res.Probes; p != nil {
		AddReportEntry(probesPrefix+"rate", p.Rate, ReportEntryVisibilityNever)
		AddReportEntry(probesPrefix+"sent", p.Total.Sent, ReportEntryVisibilityNever)
		AddReportEntry(probesPrefix+"lost", p.Total.Lost, ReportEntryVisibilityNever)
		AddReportEntry(probesPrefix+"longestGapMs", p.Total.LongestGapMs, ReportEntryVisibilityNever)
		AddReportEntry(probesPrefix+"flowsWithLoss", p.Total.FlowsWithLoss, ReportEntryVisibilityNever)
	}
}
