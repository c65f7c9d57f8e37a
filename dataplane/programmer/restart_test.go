// These tests hold the restart rule in place: the programmer restarts (exits
// with ExitConfigChanged) exactly when a field real Felix reads only at start
// changes, and applies everything else live.
package programmer

import (
	"errors"
	"testing"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

func baseCluster() *datastore.Cluster {
	return &datastore.Cluster{
		Pools:  []datastore.IPPool{{Name: "ipip", CIDR: "10.65.0.0/16", IPIPMode: "Always"}},
		Nodes:  []datastore.Node{{Name: "node-1", IPv4Address: "10.0.1.11/24"}},
		Blocks: []datastore.BlockAffinity{{CIDR: "10.65.1.0/26", Node: "node-1"}},
	}
}

func TestRestartKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rel     config.Release
		mutate  func(*datastore.Cluster)
		restart bool
		pcr     string // programClusterRoutes of both the base and the changed cluster
	}{
		{"nothing", config.R333, func(*datastore.Cluster) {}, false, ""},
		{"unknown value is the same as unset", config.R333, func(c *datastore.Cluster) { c.Felix.ProgramClusterRoutes = "Bogus" }, false, ""},
		{"explicit default is the same as unset", config.R333, func(c *datastore.Cluster) { c.Felix.ProgramClusterRoutes = "EnabledIPIPOnly" }, false, ""},
		{"programClusterRoutes changes", config.R333, func(c *datastore.Cluster) { c.Felix.ProgramClusterRoutes = "Disabled" }, true, ""},
		{"deviceRouteProtocol changes", config.R333, func(c *datastore.Cluster) { c.Felix.DeviceRouteProtocol = 99 }, true, ""},
		{"deviceRouteProtocol explicit default", config.R333, func(c *datastore.Cluster) { c.Felix.DeviceRouteProtocol = 80 }, false, ""},
		{"last IPIP pool becomes no-encap", config.R333, func(c *datastore.Cluster) { c.Pools[0].IPIPMode = "Never" }, true, ""},
		{"IPIP Always to CrossSubnet", config.R333, func(c *datastore.Cluster) { c.Pools[0].IPIPMode = "CrossSubnet" }, false, ""},
		{"no-encap pool added, BIRD owns no-encap", config.R333, func(c *datastore.Cluster) {
			c.Pools = append(c.Pools, datastore.IPPool{Name: "flat", CIDR: "10.66.0.0/16"})
		}, false, ""},
		{"no-encap pool added, programmer owns no-encap", config.R333, func(c *datastore.Cluster) {
			c.Felix.ProgramClusterRoutes = "Enabled"
			c.Pools = append(c.Pools, datastore.IPPool{Name: "flat", CIDR: "10.66.0.0/16"})
		}, true, ""},
		{"blocks, nodes, workloads", config.R333, func(c *datastore.Cluster) {
			c.Blocks = append(c.Blocks, datastore.BlockAffinity{CIDR: "10.65.2.0/26", Node: "node-2"})
			c.Nodes = append(c.Nodes, datastore.Node{Name: "node-2"})
			c.Workloads = append(c.Workloads, datastore.Workload{Name: "w"})
		}, false, ""},
		// Felix restarts on any FelixConfiguration field but four (daemon.go
		// handledConfigChanges, all three releases).
		{"refresh interval", config.R333, func(c *datastore.Cluster) { c.Felix.RouteRefreshInterval = "1s" }, true, ""},
		{"refresh interval explicit default", config.R333, func(c *datastore.Cluster) { c.Felix.RouteRefreshInterval = "90s" }, false, ""},
		{"refresh interval, 3.31", config.R331, func(c *datastore.Cluster) { c.Felix.RouteRefreshInterval = "1s" }, true, "Enabled"},
		// 3.31 and 3.32 restart on IPIP/VXLAN changes only, not on no-encap
		// needed (release-v3.31 3cdeae8f7ace, release-v3.32 de60d98e97a7).
		{"no-encap pool added, programmer owns no-encap, 3.31", config.R331, func(c *datastore.Cluster) {
			c.Pools = append(c.Pools, datastore.IPPool{Name: "flat", CIDR: "10.66.0.0/16"})
		}, false, "Enabled"},
		{"no-encap pool added, programmer owns no-encap, 3.32", config.R332, func(c *datastore.Cluster) {
			c.Pools = append(c.Pools, datastore.IPPool{Name: "flat", CIDR: "10.66.0.0/16"})
		}, false, "Enabled"},
		{"last IPIP pool becomes no-encap, 3.32", config.R332, func(c *datastore.Cluster) { c.Pools[0].IPIPMode = "Never" }, true, "Enabled"},
		{"BGPConfiguration is not the programmer's", config.R333, func(c *datastore.Cluster) { c.BGP.ProgramClusterRoutes = "Disabled" }, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := baseCluster()
			b.Felix.ProgramClusterRoutes = tc.pcr
			base := restartKeyOf(b, tc.rel, nil)
			c := baseCluster()
			c.Felix.ProgramClusterRoutes = tc.pcr
			tc.mutate(c)
			k := restartKeyOf(c, tc.rel, nil)
			if got := k != base; got != tc.restart {
				t.Errorf("restart = %v, want %v (%+v vs %+v)", got, tc.restart, base, k)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	if ExitCode(nil) != 0 || ExitCode(ErrConfigChanged) != ExitConfigChanged || ExitCode(errTest) != ExitError {
		t.Error("exit code mapping")
	}
}

var errTest = errors.New("boom")
