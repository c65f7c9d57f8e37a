package results

import (
	"strings"
	"testing"
)

func TestSelectLabels(t *testing.T) {
	f := &ResultsFile{Scenarios: []ScenarioResult{
		{Name: "upgrade ipip", Labels: []string{"headline", "upgrade", "ipip"}},
		{Name: "upgrade ipip", Labels: []string{"headline", "upgrade", "ipip"}},
		{Name: "live noencap", Labels: []string{"headline", "liveconfig", "noencap"}},
		{Name: "old row"},
	}}
	got, err := SelectLabels(f, "upgrade && ipip")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Scenarios) != 2 || got.Scenarios[0].Name != "upgrade ipip" || got.Repeats["upgrade ipip"].Runs != 2 {
		t.Errorf("selected %+v, repeats %+v", got.Scenarios, got.Repeats)
	}
	if len(f.Scenarios) != 4 {
		t.Errorf("the input lost rows: %d", len(f.Scenarios))
	}
	// The positive control: a filter that selects everything keeps every
	// labelled row.
	all, _ := SelectLabels(f, "headline")
	if len(all.Scenarios) != 3 {
		t.Errorf("headline selected %d rows, want 3", len(all.Scenarios))
	}
	if _, err := SelectLabels(f, "upgrade &&"); err == nil || !strings.Contains(err.Error(), `"upgrade &&"`) {
		t.Errorf("a malformed filter: %v, want an error naming it", err)
	}
}
