// These root tests run each BIRD release birdcage knows (1.6, 2.0, 2.17,
// 3.1) as three containers on the lab fixture: from its own rootfs (2.0: the
// host's bird2), with its own confd render. Every release must bring the
// no-encap mesh up and program every remote block, and what runs must be
// that release (its `show status` says so). 1.6 runs two daemons per node,
// bird and bird6, as Calico's node software does. A release that is not
// prepared (ci/bird-releases) skips with its name.
package bird_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/bird/birdtest"
	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/internal/calico/config"
)

func TestReleaseMesh(t *testing.T) {
	for _, br := range release.All {
		t.Run(string(br), func(t *testing.T) {
			requireRoot(t)
			rel := birdtest.NeedRelease(t, string(br))
			releaseMesh(t, rel)
		})
	}
}

func releaseMesh(t *testing.T, rel bird.Release) {
	l := newLab(t)
	c := clusterNodes(3, true)
	l.bridge("sw")
	for i, nd := range c.Nodes {
		l.link("sw", fmt.Sprintf("v%d", i+1), true, nd.Name, "eth0")
		l.addr(nd.Name, "eth0", nd.IPv4Address)
		l.addr(nd.Name, "eth0", nd.IPv6Address)
	}
	var insts []*bird.Instance
	for _, nd := range c.Nodes {
		ren, err := confd.Render(c, nd.Name, config.R333, confd.Options{BIRD: rel.Name})
		if err != nil {
			t.Fatal(err)
		}
		if !ren.Policy.Effective.ProgramNoEncapClusterRoutes() {
			t.Fatalf("guard: BIRD must own no-encap routes here, policy is %+v", ren.Policy)
		}
		if (ren.Config6 != nil) != rel.Name.TwoDaemons() {
			t.Fatalf("BIRD %s: bird6 config rendered=%v", rel.Name, ren.Config6 != nil)
		}
		b, err := bird.New(l.r, bird.Options{Name: nd.Name, NetNS: l.nsName(nd.Name), Release: rel})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.WriteConfig(ren.Daemons()); err != nil {
			t.Fatal(err)
		}
		insts = append(insts, b)
	}
	var daemons []*bird.Instance
	for _, b := range insts {
		daemons = append(daemons, b)
		if six := b.Pair(); six != nil {
			daemons = append(daemons, six)
		}
	}
	if want := len(insts) * map[bool]int{true: 2, false: 1}[rel.Name.TwoDaemons()]; len(daemons) != want {
		t.Fatalf("BIRD %s: %d daemons for %d nodes, want %d", rel.Name, len(daemons), len(insts), want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Concurrent starts, each timed to its socket answering (on 1.x: both
	// daemons of the node).
	start := time.Now()
	toSocket := make([]time.Duration, len(insts))
	errs := make([]error, len(insts))
	var wg sync.WaitGroup
	for i, b := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			errs[i] = b.Start(ctx)
			toSocket[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := bird.WaitAllEstablished(ctx, insts...); err != nil {
		t.Fatal(err)
	}
	established := time.Since(start)

	// What answers is the release asked for, not the host's BIRD.
	want := strings.Fields(rel.Package)
	for _, b := range daemons {
		r, err := b.Client().Run(ctx, "show status")
		if err != nil {
			t.Fatal(err)
		}
		ver := strings.TrimSpace(r.Lines[0].Text)
		if !strings.HasPrefix(ver, "BIRD "+string(rel.Name)+".") && !(rel.Rootfs == "" && strings.HasPrefix(ver, "BIRD 2.0")) {
			t.Fatalf("%s answers %q, want BIRD %s (%s)", b.Name(), ver, rel.Name, want)
		}
	}

	// Routes are exchanged: every node has a proto bird route to every
	// remote v4 block (metric 1024 in 3.33, carried in bgp_local_pref and
	// written as each route's krt_metric, via its owner) and every remote
	// v6 block.
	routes := time.Now()
	for _, nd := range c.Nodes {
		eventually(t, 15*time.Second, nd.Name+" v4 routes", func() string { return remoteRoutesMissing(l, c, nd.Name, confd.RouteMetric(c.BGP, config.R333)) })
		eventually(t, 15*time.Second, nd.Name+" v6 routes", func() string {
			got := l.birdRoutes(nd.Name, netlink.FAMILY_V6)
			var miss []string
			for _, blk := range c.Blocks {
				if blk.Node != nd.Name && strings.Contains(blk.CIDR, ":") {
					if _, ok := got[blk.CIDR]; !ok {
						miss = append(miss, blk.CIDR)
					}
				}
			}
			return strings.Join(miss, ", ")
		})
	}
	routesAfter := established + time.Since(routes)

	var rss []string
	for _, b := range daemons {
		n, err := vmRSS(b.Pid())
		if err != nil {
			t.Fatal(err)
		}
		rss = append(rss, fmt.Sprintf("%s %.1f", b.Daemon(), float64(n)/(1<<20)))
	}
	slices.Sort(toSocket)
	t.Logf("FIGURE: BIRD %s (%s): %d daemons; start->socket per node (all its daemons) min %v median %v max %v; all sessions Established %v after the first start; all remote v4+v6 blocks programmed by %v; RSS MiB per daemon: %s",
		rel.Name, rel.Package, len(daemons), toSocket[0].Round(time.Millisecond), toSocket[len(toSocket)/2].Round(time.Millisecond),
		toSocket[len(toSocket)-1].Round(time.Millisecond), established.Round(time.Millisecond), routesAfter.Round(time.Millisecond), strings.Join(rss, ", "))
}

// vmRSS is one process's resident set (Instance.RSS sums bird and bird6).
func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			_, err := fmt.Sscan(v, &kb)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("pid %d: no VmRSS", pid)
}
