package topo

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/run"
)

// BenchmarkBuildTeardown measures one build plus teardown of each built-in
// topology and of generated noencap clusters; up and down are reported
// separately (ms/up, ms/down). Run with -benchtime=1x for big sizes.
func BenchmarkBuildTeardown(b *testing.B) {
	requireRoot(b)
	cases := []struct {
		name string
		t    func() (*Topology, error)
	}{
		{"noencap", func() (*Topology, error) { return Builtin("noencap") }},
		{"ipip", func() (*Topology, error) { return Builtin("ipip") }},
		{"dualtor", func() (*Topology, error) { return Builtin("dualtor") }},
		{"noencap-nodes=20", func() (*Topology, error) { return NoEncap(20, 2), nil }},
		{"noencap-nodes=100", func() (*Topology, error) { return NoEncap(100, 2), nil }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var up, down time.Duration
			for range b.N {
				tp, err := c.t()
				if err != nil {
					b.Fatal(err)
				}
				r, err := run.New()
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				_, err = Build(context.Background(), tp, r, Options{})
				if errors.Is(err, ErrNoIPIP) {
					r.Close()
					b.Skip("needs the ipip kernel feature (tunl0)")
				}
				if err != nil {
					r.Close()
					b.Fatal(err)
				}
				mid := time.Now()
				if err := r.Close(); err != nil {
					b.Fatal(err)
				}
				up += mid.Sub(start)
				down += time.Since(mid)
			}
			b.ReportMetric(float64(up.Milliseconds())/float64(b.N), "ms/up")
			b.ReportMetric(float64(down.Milliseconds())/float64(b.N), "ms/down")
		})
	}
}

// BenchmarkIPCommandBaseline makes the same namespaces, bridge and veths as
// NoEncap(nodes, 2) with one `ip` command per operation, the way a shell
// script would: the yardstick for BenchmarkBuildTeardown.
func BenchmarkIPCommandBaseline(b *testing.B) {
	requireRoot(b)
	if _, err := exec.LookPath("ip"); err != nil {
		b.Skip("needs iproute2's ip")
	}
	for _, nodes := range []int{20, 100} {
		b.Run(fmt.Sprintf("noencap-nodes=%d", nodes), func(b *testing.B) {
			var up, down time.Duration
			for range b.N {
				r, err := run.New()
				if err != nil {
					b.Fatal(err)
				}
				var names []string
				ip := func(args ...string) {
					if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
						b.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
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
					for w := range 2 {
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
				for _, n := range names {
					ip("netns", "del", n)
				}
				down += time.Since(mid)
				up += mid.Sub(start)
				r.Close()
			}
			b.ReportMetric(float64(up.Milliseconds())/float64(b.N), "ms/up")
			b.ReportMetric(float64(down.Milliseconds())/float64(b.N), "ms/down")
		})
	}
}
