package main

// The committed durations (ci/shard-durations.json) parse, are what a
// fresh clone's shards balance by, and cover the suite: the specs they
// lack are named (a spec added since they were recorded counts as the
// median), and most of the suite must be covered.

import (
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/env"
)

func TestCommittedDurationsCoverTheSuite(t *testing.T) {
	t.Chdir("../..")
	if got := durationsDefault(""); cfg.ShardDurations == "" && got != committedDurations {
		t.Errorf("with no --durations and no $%s the shards balance by %q, want %s", env.ShardDurations, got, committedDurations)
	}
	specs, err := listSuite("")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) < 50 {
		t.Fatalf("the suite lists %d specs: the dry run found too few to judge coverage", len(specs))
	}
	timed, err := withDurations(specs, committedDurations)
	if err != nil {
		t.Fatalf("%s does not parse: %v", committedDurations, err)
	}
	var missing []string
	recorded := 0
	for _, s := range timed {
		if s.Seconds > 0 {
			recorded++
		} else {
			missing = append(missing, s.Text)
		}
	}
	// Skipped specs record no duration (0 s): they and new specs count as
	// the median. Named, so the file can be refreshed (ci/shard-durations.md).
	if len(missing) > 0 {
		t.Logf("%d of %d specs have no duration in %s (they count as the median):\n  %s", len(missing), len(specs), committedDurations, strings.Join(missing, "\n  "))
	}
	if recorded*2 < len(specs) {
		t.Errorf("%s gives durations for %d of %d specs: refresh it from a full run (ci/shard-durations.md)", committedDurations, recorded, len(specs))
	}
}
