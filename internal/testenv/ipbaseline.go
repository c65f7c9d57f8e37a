package testenv

import (
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/birdcage/birdcage/internal/run"
)

// IPCommandBaseline makes the namespaces, bridge and veths of an N-node
// single-switch cluster (topo.NoEncap's shape, workloads per node) with one
// `ip` command per operation, the way a shell script would, and deletes
// them again: the yardstick the topology and cluster benchmarks report
// against in the same run. Names carry r's prefix, so a crash leaves
// nothing `birdcage clean` cannot find.
func IPCommandBaseline(r *run.Run, nodes, workloads int) (up, down time.Duration, err error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return 0, 0, fmt.Errorf("the baseline needs iproute2's ip: %w", err)
	}
	var names []string
	var failed error
	ip := func(args ...string) {
		if failed != nil {
			return
		}
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			failed = fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	start := time.Now()
	sw := r.Name("lan")
	ip("netns", "add", sw)
	names = append(names, sw)
	ip("-n", sw, "link", "add", "br0", "type", "bridge")
	ip("-n", sw, "link", "set", "br0", "up")
	for i := range nodes {
		node := r.Name(fmt.Sprintf("node-%d", i+1))
		ip("netns", "add", node)
		names = append(names, node)
		port := fmt.Sprintf("p%d", i+1)
		ip("-n", node, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", sw)
		ip("-n", sw, "link", "set", port, "master", "br0", "up")
		ip("-n", node, "addr", "add", fmt.Sprintf("10.10.%d.%d/16", i/200, 11+i%200), "dev", "eth0")
		ip("-n", node, "link", "set", "eth0", "up")
		for w := range workloads {
			wl := fmt.Sprintf("%s-w%d", node, w)
			ip("netns", "add", wl)
			names = append(names, wl)
			host := fmt.Sprintf("cali%07d%d", i, w)
			ip("-n", node, "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", wl)
			ip("-n", wl, "addr", "add", fmt.Sprintf("10.244.%d.%d/32", i, w+1), "dev", "eth0")
			ip("-n", wl, "link", "set", "eth0", "up")
			ip("-n", node, "link", "set", host, "up")
			ip("-n", node, "route", "add", fmt.Sprintf("10.244.%d.%d/32", i, w+1), "dev", host)
		}
	}
	mid := time.Now()
	buildErr := failed
	failed = nil
	for _, n := range names {
		ip("netns", "del", n)
	}
	if buildErr != nil {
		return 0, 0, buildErr
	}
	return mid.Sub(start), time.Since(mid), failed
}
