package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/bird/birdtest"
	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
)

// birdVersion is what a node's BIRD says it is (`show status`, first line).
func birdVersion(ctx context.Context, t *testing.T, b *bird.Instance) string {
	t.Helper()
	r, err := b.Client().Run(ctx, "show status")
	if err != nil || len(r.Lines) == 0 {
		t.Fatalf("%s: show status: %v", b.Name(), err)
	}
	return strings.TrimSpace(r.Lines[0].Text)
}

// routesEverywhere waits until every node has a route to every other
// node's block. Start returns when the sessions are Established and the
// programmers synced, which is before BIRD has written every route it
// learned: a node SIGKILLed in that instant keeps (persist) only the
// routes it had, and a BIRD restarted with -R writes the missing ones only
// when its recovery ends — seen as a 1 s blackhole on one flow, once in
// about 40 runs, before this wait.
func routesEverywhere(ctx context.Context, t *testing.T, c *Cluster, when string) {
	t.Helper()
	m := judge.HaveRemoteBlockRoutes()
	if err := poll.Until(ctx, 20*time.Millisecond, func() bool { ok, _ := m.Match(c); return ok }); err != nil {
		t.Fatalf("%s: %s", when, m.FailureMessage(c))
	}
}

// restartsDone waits until no BIRD in the cluster is in a graceful
// restart: the restarted one's recovery (what calico-node -bird-ready
// waits for) and its peers' stale routes of it. Until then peers rewrite
// the restarted node's routes; BIRD 1.6 does that as a delete and an add,
// a no-route window of some microseconds.
func restartsDone(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	for _, n := range c.Nodes() {
		if err := n.BIRD.WaitRestartsDone(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// flowsWithoutLoss runs probes between every pair of nodes until a few
// hundred per flow arrived and fails on any loss.
func flowsWithoutLoss(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	rep := probeUntil(ctx, t, c, 200)
	if rep.Total.Lost != 0 || len(rep.Flows) == 0 {
		t.Fatalf("%d flows lost %d probes:\n%s", len(rep.Flows), rep.Total.Lost, results.GapTable(rep))
	}
}

// A 3-node no-encap cluster converges on every BIRD release, every node
// runs that release (its BIRD says so — on 1.x both bird and bird6 — and
// the results record it), and probes flow between every pair.
func TestClusterPerBIRDRelease(t *testing.T) {
	for _, br := range release.All {
		t.Run(string(br), func(t *testing.T) {
			testenv.NeedRoot(t)
			rel := birdtest.NeedRelease(t, string(br))
			start := time.Now()
			c := startOrSkip(t, "noencap", Options{BIRD: string(br)})
			converged := time.Since(start)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res := c.Result("per-release", nil)
			var rss []string
			for _, n := range c.Nodes() {
				if got := n.BIRDRelease().Name; got != br {
					t.Fatalf("%s runs BIRD %s, want %s", n.Name, got, br)
				}
				if v := birdVersion(ctx, t, n.BIRD); !strings.HasPrefix(v, "BIRD "+string(br)+".") {
					t.Fatalf("%s: BIRD answers %q, want release %s", n.Name, v, br)
				}
				if six := n.BIRD.Pair(); (six != nil) != br.TwoDaemons() {
					t.Fatalf("%s: bird6 present=%v on BIRD %s", n.Name, six != nil, br)
				} else if six != nil {
					if v := birdVersion(ctx, t, six); !strings.HasPrefix(v, "BIRD "+string(br)+".") {
						t.Fatalf("%s: bird6 answers %q, want release %s", n.Name, v, br)
					}
				}
				if got := res.BIRDReleases[n.Name]; !strings.HasPrefix(got, string(br)+" (") {
					t.Errorf("results record %s on BIRD %q, want %s", n.Name, got, br)
				}
				b, err := n.BIRD.RSS()
				if err != nil {
					t.Fatal(err)
				}
				rss = append(rss, fmt.Sprintf("%.1f", float64(b)/(1<<20)))
			}
			routesEverywhere(ctx, t, c, "after Start")
			flowsWithoutLoss(ctx, t, c)
			t.Logf("FIGURE: BIRD %s (%s): 3-node noencap cluster converged (sessions Established, programmers synced) %v after Start; probes flow on every pair; BIRD RSS MiB %s",
				br, rel.Package, converged.Round(time.Millisecond), strings.Join(rss, ", "))
		})
	}
}

// UpgradeNode with UpgradeOptions.BIRD replaces BIRD's release with the
// programmer: node-2 moves from 2.0 to 3.1 (upstream 2 to 3), and from 1.6
// to 2.0 (the fork-retirement path: bird + bird6 become one daemon with
// channels); its new BIRD is that release (and says so), the others stay,
// and traffic flows afterwards.
func TestUpgradeNodeBIRDRelease(t *testing.T) {
	for _, tc := range []struct{ from, to release.Name }{{release.BIRD20, release.BIRD31}, {release.BIRD16, release.BIRD20}} {
		t.Run(string(tc.from)+"-"+string(tc.to), func(t *testing.T) {
			testenv.NeedRoot(t)
			birdtest.NeedRelease(t, string(tc.from))
			birdtest.NeedRelease(t, string(tc.to))
			c := startOrSkip(t, "noencap", Options{BIRD: string(tc.from)})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			n2 := c.Nodes()[1]
			if v := birdVersion(ctx, t, n2.BIRD); !strings.HasPrefix(v, "BIRD "+string(tc.from)+".") {
				t.Fatalf("guard: %s starts on %q, want %s", n2.Name, v, tc.from)
			}
			routesEverywhere(ctx, t, c, "before the upgrade")
			if _, err := c.UpgradeNode(ctx, n2.Name, config.R333, UpgradeOptions{BIRD: string(tc.to)}); err != nil {
				t.Fatal(err)
			}
			if err := c.WaitConverged(ctx); err != nil {
				t.Fatal(err)
			}
			routesEverywhere(ctx, t, c, "after the upgrade")
			restartsDone(ctx, t, c)
			if v := birdVersion(ctx, t, n2.BIRD); !strings.HasPrefix(v, "BIRD "+string(tc.to)+".") {
				t.Fatalf("after the upgrade %s answers %q, want BIRD %s", n2.Name, v, tc.to)
			}
			if six := n2.BIRD.Pair(); (six != nil) != tc.to.TwoDaemons() {
				t.Fatalf("after the upgrade to %s, bird6 driven=%v", tc.to, six != nil)
			}
			for _, n := range c.Nodes() {
				want := tc.from
				if n == n2 {
					want = tc.to
				}
				if got := c.Measure().BIRDReleases()[n.Name]; !strings.HasPrefix(got, string(want)+" (") {
					t.Errorf("%s recorded on BIRD %q, want %s", n.Name, got, want)
				}
			}
			flowsWithoutLoss(ctx, t, c)
		})
	}
}
