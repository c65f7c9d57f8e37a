package scenarios_test

import (
	"fmt"
	"net/netip"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/internal/testenv"
)

// traceRoutes starts a netlink route trace of every node (skipping, naming
// the feature, where the kernel cannot run one).
func traceRoutes(c *harness.Cluster) map[string]*harness.RouteTrace {
	GinkgoHelper()
	out := map[string]*harness.RouteTrace{}
	for _, n := range c.Nodes() {
		t, err := c.Measure().TraceRoutes(n.Name)
		testenv.SkipIfMissing(GinkgoT(), err, "the netlink route trace")
		Expect(err).NotTo(HaveOccurred())
		out[n.Name] = t
	}
	return out
}

// programmerPIDs is every pid n's programmer has run as (the current one
// and each restart's).
func programmerPIDs(n *harness.Node) map[int]bool {
	out := map[int]bool{}
	if p := n.Programmer.Pid(); p != 0 {
		out[p] = true
	}
	for _, r := range n.Programmer.Restarts() {
		if r.PID != 0 {
			out[r.PID] = true
		}
	}
	return out
}

// addsBy splits the RTM_NEWROUTE requests for p in rs by sender: n's BIRD
// (its current pid) and n's programmer (any of its pids).
func addsBy(n *harness.Node, rs bpf.RouteRequests, p netip.Prefix) (bird, programmer bpf.RouteRequests) {
	progs, birdPID := programmerPIDs(n), n.BIRD.Pid()
	for _, r := range rs.To(p).Adds() {
		switch {
		case r.PID == birdPID && birdPID != 0:
			bird = append(bird, r)
		case progs[r.PID]:
			programmer = append(programmer, r)
		}
	}
	return bird, programmer
}

// errnoCounts summarises the answers to rs ("ok 3, file exists 12").
func errnoCounts(rs bpf.RouteRequests) string {
	counts, order := map[string]int{}, []string{}
	for _, r := range rs {
		k := "ok"
		switch {
		case !r.Answered:
			k = "no ack"
		case r.Errno != 0:
			k = r.Errno.Error()
		}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%s %d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}
