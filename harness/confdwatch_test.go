package harness

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/birdcage/birdcage/dataplane/timing"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// With one confd per node, renders run on several goroutines at once; each
// node's render count and deprecation warnings must still add up per node
// (one warning per render while BIRD programs an IPIP pool).
func TestConcurrentRendersKeepWarningAccounting(t *testing.T) {
	cl := &datastore.Cluster{
		Pools: []datastore.IPPool{{Name: "ipip", CIDR: "10.65.0.0/16", IPIPMode: "Always"}},
		BGP:   datastore.BGPConfiguration{ProgramClusterRoutes: string(config.Enabled)},
		Felix: datastore.FelixConfiguration{ProgramClusterRoutes: string(config.Disabled)},
	}
	c := &Cluster{log: slog.New(slog.NewTextHandler(io.Discard, nil)), timing: timing.Zero()}
	c.confd = confdLoop{c}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("node-%d", i)
		cl.Nodes = append(cl.Nodes, datastore.Node{Name: name, IPv4Address: fmt.Sprintf("10.0.0.%d/24", 10+i)})
		cl.Blocks = append(cl.Blocks, datastore.BlockAffinity{CIDR: fmt.Sprintf("10.65.%d.0/26", i), Node: name})
		c.nodes = append(c.nodes, &Node{Name: name, release: config.R333})
	}
	const rounds = 20
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if _, err := c.confd.render(n, cl); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, n := range c.nodes {
		if n.Renders() != rounds {
			t.Errorf("%s: %d renders, want %d", n.Name, n.Renders(), rounds)
		}
		if w := len(n.Warnings()); w != rounds {
			t.Errorf("%s: %d deprecation warnings for %d renders while BIRD programs the IPIP pool; want one per render", n.Name, w, rounds)
		}
	}
}
