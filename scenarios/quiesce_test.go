package scenarios_test

// Double programming on no-encap does not settle the moment the programmer
// has written its routes. Each node's BIRD learns the programmer's proto 80
// route (kernel protocol `learn`) and, since no iBGP reject arm covers
// eth0, exports it to its peers: §5's known re-advertisement gap. From 3.32
// the export filter turns that route's priority 0 into bgp_local_pref
// 2147483647 (buildExportFilter @ 6609dea54713: "bgp_local_pref = max −
// krt_metric" for a kernel-learned route), so a peer prefers it
// (preference 200) over the owner's own advertisement and writes it at
// krt_metric 0: the programmer's key. BIRD 2 updates a route it already
// exported with one NLM_F_REPLACE, so when the re-advertisement lands after
// the peer's programmer wrote, BIRD takes the route back (proto bird,
// metric 0) until the programmer's next resync replaces it again; that
// take-back changes which nodes hold an alien route, so it can move other
// nodes' best paths in turn (measured: 18 ms after the programmer's
// replace; 1 run in 4 idle, 3 in 6 under load).
//
// Specs that judge what happens to routes the programmer holds must start
// from a state where it holds them. quiesceClusterRoutes waits for that
// state by observation: a span in which every node's programmer completed
// two full resyncs and no node's route timeline changed for any remote
// block. BIRD writes a route only when its best path changes or a scan finds
// its route missing (refused "File exists" while the programmer's holds the
// key), and best paths change only when some route changes; so a span with
// no change across every programmer's resyncs is a fixed point, not a lull.

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// quiescence is what quiesceClusterRoutes saw before the routes stood still.
type quiescence struct {
	// Rounds counts the spans tried, the last one quiet.
	Rounds int
	// BIRDWrites counts the remote-block routes BIRD wrote after `since`
	// (adds and replaces to proto bird, every node): BIRD taking back a
	// route the programmer had written.
	BIRDWrites int
	// Writes lists them, one per line, for the result's notes.
	Writes []string
	// At is the end of the quiet span.
	At int64
}

// quiesceClusterRoutes returns once no remote-block route on any node of c
// changed for two full resyncs of every programmer, and what BIRD wrote
// from since until then. It fails the spec if that does not happen within
// limit (BIRD and the programmers taking a route from each other for good).
func quiesceClusterRoutes(c *harness.Cluster, since int64, limit time.Duration) quiescence {
	GinkgoHelper()
	var q quiescence
	deadline := monoclock.Now() + int64(limit)
	for {
		q.Rounds++
		from := monoclock.Now()
		waitEveryProgrammerResyncs(c, 2)
		// Every change made so far is on the timelines before the span
		// ends, so none falls just past it unseen.
		Expect(c.SyncTimelines()).To(Succeed())
		to := monoclock.Now()
		moved := 0
		for _, n := range c.Nodes() {
			tl := c.Timeline(n.Name)
			Expect(tl.Judgeable(since, to)).To(Succeed(), "the route timeline of %s while the cluster routes settle", n.Name)
			for _, b := range c.RemoteBlocks(n.Name) {
				moved += len(tl.EventsFor(b, from, to))
			}
		}
		q.At = to
		if moved == 0 {
			q.BIRDWrites, q.Writes = birdWrites(c, since, to)
			return q
		}
		if monoclock.Now() > deadline {
			_, writes := birdWrites(c, since, to)
			Fail(fmt.Sprintf("the cluster routes did not stand still for two programmer resyncs within %v (%d rounds; %d route events in the last); BIRD's writes since the takeover:\n%s",
				limit, q.Rounds, moved, strings.Join(writes, "\n")))
		}
	}
}

// birdWrites lists the proto bird adds and replaces of remote blocks on
// every node of c in [from, to].
func birdWrites(c *harness.Cluster, from, to int64) (int, []string) {
	var out []string
	for _, n := range c.Nodes() {
		tl := c.Timeline(n.Name)
		for _, b := range c.RemoteBlocks(n.Name) {
			for _, e := range tl.EventsFor(b, from, to) {
				if e.Route.Protocol == kroute.ProtoBIRD && (e.Kind == event.Add || e.Kind == event.Replace) {
					out = append(out, fmt.Sprintf("%s %s %s metric %d at +%.1f ms", n.Name, e.Kind, b, e.Route.Metric, float64(e.At-from)/1e6))
				}
			}
		}
	}
	return len(out), out
}

// noteQuiescence records in res what BIRD took back before the cluster
// routes stood still.
func noteQuiescence(res *results.ScenarioResult, q quiescence) {
	res.Figure("birdWritesBeforeRoutesStoodStill", float64(q.BIRDWrites), results.KindSize)
	res.Figure("roundsUntilRoutesStoodStill", float64(q.Rounds), results.KindSize)
	if len(q.Writes) > 0 {
		res.Notes = append(res.Notes, "BIRD wrote remote-block routes after the programmer's takeover, before the routes stood still: "+strings.Join(q.Writes, "; "))
	}
}

// waitFullResyncs waits until the programmer's status file has shown n
// full kernel re-reads after now, and returns how many it saw.
func waitFullResyncs(node *harness.Node, n int) int {
	GinkgoHelper()
	return waitFullResyncsWithin(node, n, scenariotest.Machine.Wait(2*time.Minute))
}

// waitFullResyncsWithin is waitFullResyncs with its own limit.
func waitFullResyncsWithin(node *harness.Node, n int, limit time.Duration) int {
	GinkgoHelper()
	return waitResyncs([]*harness.Node{node}, n, limit)
}

// waitEveryProgrammerResyncs waits until every node's programmer has shown
// n full kernel re-reads after now (all nodes watched at once, so a round
// costs about n resync intervals, not n per node).
func waitEveryProgrammerResyncs(c *harness.Cluster, n int) {
	GinkgoHelper()
	waitResyncs(c.Nodes(), n, scenariotest.Machine.Wait(2*time.Minute))
}

// waitResyncs waits until each of nodes' programmers has shown n full
// kernel re-reads after now, and returns the fewest any of them showed.
func waitResyncs(nodes []*harness.Node, n int, limit time.Duration) int {
	GinkgoHelper()
	last, seen := map[string]int64{}, map[string]int{}
	for _, nd := range nodes {
		st, err := nd.Programmer.Status()
		Expect(err).NotTo(HaveOccurred())
		last[nd.Name] = st.LastResyncUnixNano
	}
	fewest := 0
	Eventually(func() int {
		fewest = -1
		for _, nd := range nodes {
			if st, err := nd.Programmer.Status(); err == nil && st.LastResyncUnixNano > last[nd.Name] {
				last[nd.Name] = st.LastResyncUnixNano
				seen[nd.Name]++
			}
			if fewest < 0 || seen[nd.Name] < fewest {
				fewest = seen[nd.Name]
			}
		}
		return fewest
	}).WithTimeout(limit).WithPolling(50*time.Millisecond).Should(BeNumerically(">=", n),
		"every programmer should resync the kernel every routeRefreshInterval")
	return fewest
}
