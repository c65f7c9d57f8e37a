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

	"github.com/birdcage/birdcage/dataplane/config"
	"github.com/birdcage/birdcage/harness/bird"
	"github.com/birdcage/birdcage/harness/bird/release"
	"github.com/birdcage/birdcage/harness/confd"
	"github.com/vishvananda/netlink"
)

func TestReleaseMesh(t *testing.T) {
	for _, br := range release.All {
		t.Run(string(br), func(t *testing.T) {
			requireRoot(t)
			rel := bird.NeedRelease(t, string(br))
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
		confs := map[string][]byte{"bird": ren.Config}
		if rel.Name.TwoDaemons() {
			confs["bird6"] = ren.Config6
		}
		for _, d := range []string{"bird", "bird6"} {
			conf, ok := confs[d]
			if !ok {
				continue
			}
			name := nd.Name
			if d == "bird6" {
				name += "-6"
			}
			b, err := bird.New(l.r, bird.Options{Name: name, NetNS: l.nsName(nd.Name), Release: rel, Daemon: d})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.WriteConfig(conf); err != nil {
				t.Fatal(err)
			}
			insts = append(insts, b)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Concurrent starts, each timed to its socket answering.
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
	for _, b := range insts {
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
	// remote v4 block (metric 0, via its owner) and every remote v6 block.
	routes := time.Now()
	for _, nd := range c.Nodes {
		eventually(t, 15*time.Second, nd.Name+" v4 routes", func() string { return remoteRoutesMissing(l, c, nd.Name, 0) })
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
	for _, b := range insts {
		n, err := b.RSS()
		if err != nil {
			t.Fatal(err)
		}
		rss = append(rss, fmt.Sprintf("%s %.1f", b.Daemon(), float64(n)/(1<<20)))
	}
	if testing.Verbose() && rel.Name.TwoDaemons() {
		t.Log(mustRead(insts[0].LogPath()))
	}
	slices.Sort(toSocket)
	t.Logf("FIGURE: BIRD %s (%s): %d daemons; start->socket min %v median %v max %v; all sessions Established %v after the first start; all remote v4+v6 blocks programmed by %v; RSS MiB per daemon: %s",
		rel.Name, rel.Package, len(insts), toSocket[0].Round(time.Millisecond), toSocket[len(toSocket)/2].Round(time.Millisecond),
		toSocket[len(toSocket)-1].Round(time.Millisecond), established.Round(time.Millisecond), routesAfter.Round(time.Millisecond), strings.Join(rss, ", "))
}

func mustRead(p string) string { b, _ := os.ReadFile(p); return string(b) }
