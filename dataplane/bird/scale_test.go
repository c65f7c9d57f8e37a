// Scale figures: how long 20 BIRD containers take from the first start to
// every session Established, as a full iBGP mesh and with one route
// reflector, and what each instance costs in memory. Skipped with -short.
package bird_test

import (
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/testenv"
)

func TestScaleEstablished(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("-short: the 20-node figures take ~10-20 s")
	}
	n := 20
	if s := testenv.Env().ScaleNodes; len(s) > 0 {
		if len(s) != 1 || s[0] > 200 {
			t.Fatalf("%s=%v: want one number from 2 to 200", env.ScaleNodes, s)
		}
		n = s[0]
	}
	for _, mode := range []string{"mesh", "reflector"} {
		t.Run(mode, func(t *testing.T) {
			l := newLab(t)
			c := clusterNodes(n, false)
			if mode == "reflector" {
				off := false
				c.BGP.NodeToNodeMeshEnabled = &off
				c.Nodes[0].RouteReflector = true
			}
			nodes := buildMesh(t, l, c, config.R333)
			var insts []*bird.Instance
			sessions := 0
			for _, nd := range nodes {
				insts = append(insts, nd.bird)
				sessions += len(nd.ren.Peers)
			}
			took := startAll(t, insts, 3*time.Minute)
			last := nodes[len(nodes)-1]
			d := eventually(t, 30*time.Second, last.name+" routes to every remote block", func() string { return remoteRoutesMissing(l, c, last.name, last.ren.Policy.KernelMetric) })
			var total int64
			for _, nd := range nodes {
				rss, err := nd.bird.RSS()
				if err != nil {
					t.Fatal(err)
				}
				total += rss
			}
			t.Logf("FIGURE: %d nodes, %s (%d session ends): all Established %v after the first start; routes complete %v later; mean RSS %.1f MiB",
				n, mode, sessions, took.Round(time.Millisecond), d.Round(time.Millisecond), float64(total)/float64(len(nodes))/(1<<20))
		})
	}
}
