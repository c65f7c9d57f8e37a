package scenarios_test

// Configuration helpers more than one family uses: the programClusterRoutes
// pair changed live, and BIRD's reconfigurations.

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/report/results"
)

// setPairLive writes both programClusterRoutes fields as an operator does
// and waits until every programmer runs with the value the design says it
// acts on (unset and unknown: the release default) and has synced since the
// change (a restart when that value changed), and, when bgpChanged, every
// BIRD has taken the new config. It returns the change's event and how long
// the slowest programmer and BIRD took.
func setPairLive(ctx context.Context, c *harness.Cluster, felixRaw, bgpRaw string, bgpChanged bool, rel config.Release) (results.Event, float64, float64) {
	GinkgoHelper()
	pair := fmt.Sprintf("Felix=%s BGP=%s", rawName(felixRaw), rawName(bgpRaw))
	reconf := map[string]string{}
	for _, n := range c.Nodes() {
		reconf[n.Name] = lastReconfiguration(ctx, n)
	}
	change, err := c.SetProgramClusterRoutes(ctx, config.ProgramClusterRoutes(felixRaw), config.ProgramClusterRoutes(bgpRaw))
	Expect(err).NotTo(HaveOccurred())
	var programmerMs, birdMs float64
	wantFelix := designEffective(felixRaw, rel, true)
	for _, n := range c.Nodes() {
		Eventually(func() string {
			st, err := n.Programmer.Status()
			if err != nil {
				return err.Error()
			}
			if !n.Programmer.Synced(change.Mono) {
				return fmt.Sprintf("not synced since the change (state %s, programClusterRoutes %s)", st.State, st.ProgramClusterRoutes)
			}
			return st.ProgramClusterRoutes
		}).WithContext(ctx).WithTimeout(machine.Wait(60*time.Second)).WithPolling(100*time.Millisecond).
			Should(Equal(wantFelix), "%s: %s's programmer runs with the effective value %s (unset and unknown resolve to the default)", pair, n.Name, wantFelix)
		programmerMs = max(programmerMs, monoclock.Ms(monoclock.Now()-change.Mono))
		if bgpChanged {
			Eventually(func() string { return lastReconfiguration(ctx, n) }).WithContext(ctx).WithTimeout(machine.Wait(60*time.Second)).
				WithPolling(100*time.Millisecond).ShouldNot(Equal(reconf[n.Name]), "%s: %s's BIRD reconfigures for the new BGPConfiguration", pair, n.Name)
			birdMs = max(birdMs, monoclock.Ms(monoclock.Now()-change.Mono))
		}
	}
	return change, programmerMs, birdMs
}

func rawName(raw string) string {
	if raw == "" {
		return "unset"
	}
	return raw
}

// lastReconfiguration is the "Last reconfiguration on" line of birdc show
// status: it changes exactly when BIRD took a new config.
func lastReconfiguration(ctx context.Context, n *harness.Node) string {
	r, err := n.BIRD.Client().Run(ctx, "show status")
	if err != nil {
		return "error: " + err.Error()
	}
	for _, l := range r.Lines {
		if strings.HasPrefix(l.Text, "Last reconfiguration") {
			return l.Text
		}
	}
	return r.Text()
}
