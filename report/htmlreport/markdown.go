package htmlreport

import (
	"fmt"
	"io"
	"strings"

	"github.com/birdcage/birdcage/report/results"
)

// Markdown writes a summary for a CI step summary ($GITHUB_STEP_SUMMARY):
// per run its environment, then one table row per scenario with its
// verdict, lost probes, longest gap and duration, and every failure's
// first line under the table.
func Markdown(w io.Writer, runs []Run) error {
	var b strings.Builder
	for _, r := range runs {
		f := r.File
		counts := map[results.Verdict]int{}
		for _, s := range f.Scenarios {
			counts[s.VerdictOf()]++
		}
		fmt.Fprintf(&b, "### birdcage: %s\n\nkernel %s; %s; %d scenarios: %d passed, %d failed, %d skipped\n\n",
			mdEsc(r.Name), mdEsc(f.Kernel), mdEsc(f.Env.String()), len(f.Scenarios), counts[results.VerdictPass], counts[results.VerdictFail], counts[results.VerdictSkip])
		b.WriteString("| verdict | scenario | lost / sent | longest gap ms | disruptions (max per flow) | duration s |\n|---|---|---:|---:|---:|---:|\n")
		var failures []string
		for _, s := range f.Scenarios {
			v := s.VerdictOf()
			icon := map[results.Verdict]string{results.VerdictPass: "✅ pass", results.VerdictFail: "❌ FAIL", results.VerdictSkip: "⏭ skip"}[v]
			lost, gap, dis := "–", "–", "–"
			if p := s.Probes; p != nil {
				lost = fmt.Sprintf("%d / %d", p.Total.Lost, p.Total.Sent)
				gap = fmt.Sprintf("%.1f", p.Total.LongestGapMs)
				most, measured := 0, false
				for _, fl := range p.Flows {
					if fl.Delivery != nil {
						measured = true
						most = max(most, fl.DisruptionCount)
					}
				}
				if measured {
					dis = fmt.Sprint(most)
				}
			} else if g, ok := s.Figures["longestProbeGapMs"]; ok {
				gap = fmt.Sprintf("%.1f", g)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.1f |\n", icon, mdEsc(s.Name), lost, gap, dis, s.Duration)
			if v != results.VerdictPass {
				failures = append(failures, fmt.Sprintf("- **%s** (%s): %s", mdEsc(s.Name), v, mdEsc(firstLine(s.Failure))))
			}
		}
		if len(failures) > 0 {
			b.WriteString("\n" + strings.Join(failures, "\n") + "\n")
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdEsc(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if s == "" {
		return "(no message recorded)"
	}
	return s
}
