// These tests hold the renderer to each BIRD release's own syntax: for 1.6
// (two daemons, no channels), 2.17 and 3.1 (channels) the ownership matrix
// is rendered into golden files under testdata/bird-<release>/, each file
// is parsed by that release's own `bird -p` (bird6 -p for 1.6's IPv6
// half), and where a release cannot express BIRD-programmed IPIP routes the
// render is refused with an error naming the release and why.
package confd

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/dataplane/bird/birdtest"
	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/internal/calico/config"
)

// releaseGoldens are the non-default releases with golden files (2.0's are
// the top-level testdata/*.golden).
var releaseGoldens = []release.Name{release.BIRD16, release.BIRD217, release.BIRD31}

type releaseGolden struct {
	name, daemon string
	conf         []byte
}

// releaseRenders renders the pool mixes × programClusterRoutes values (3.33)
// and the route-reflector, kernel-import and hold-time shapes for BIRD
// release br.
func releaseRenders(t *testing.T, br release.Name) (out []releaseGolden, refused int) {
	t.Helper()
	tunnels, _ := br.TunnelRoutes()
	add := func(name string, r Rendered) {
		if br.TwoDaemons() {
			out = append(out, releaseGolden{name, "bird", r.Config}, releaseGolden{name + ".bird6", "bird6", r.Config6})
			return
		}
		out = append(out, releaseGolden{name, "bird", r.Config})
	}
	for _, mix := range poolMixes {
		for _, val := range fieldValues {
			c := testCluster(mix)
			c.BGP.ProgramClusterRoutes = val
			name := fmt.Sprintf("%s_%s", mix, fieldName(val))
			r, err := Render(c, "node-1", config.R333, Options{BIRD: br, Log: discard()})
			eff := config.Resolve(val, config.R333, config.BIRD, nil)
			birdIPIP := (mix == "ipip" || mix == "both") && eff.ProgramIPIPClusterRoutes()
			if birdIPIP && !tunnels {
				if !errors.Is(err, ErrNotExpressible) || !strings.Contains(err.Error(), "BIRD "+string(br)) || !strings.Contains(err.Error(), "onlink") {
					t.Errorf("BIRD %s %s: BIRD would own IPIP routes: err %v, want ErrNotExpressible naming the release and onlink", br, name, err)
				}
				refused++
				continue
			}
			if err != nil {
				t.Fatalf("BIRD %s render %s: %v", br, name, err)
			}
			if r.BIRD != br || (r.Config6 != nil) != br.TwoDaemons() {
				t.Fatalf("BIRD %s %s: rendered for %q, bird6 config present=%v", br, name, r.BIRD, r.Config6 != nil)
			}
			checkReleaseSyntax(t, br, name, r)
			add(name, r)
		}
	}
	c := testCluster("both")
	c.BGP.ProgramClusterRoutes = string(config.EnabledNoEncapOnly)
	off := false
	c.BGP.NodeToNodeMeshEnabled = &off
	c.Nodes[0].RouteReflector = true
	for _, n := range []string{"node-1", "node-2"} {
		r, err := Render(c, n, config.R333, Options{BIRD: br, Log: discard()})
		if err != nil {
			t.Fatalf("BIRD %s rr %s: %v", br, n, err)
		}
		add("shape_rr_"+n, r)
	}
	c = testCluster("noencap")
	c.Felix.ProgramClusterRoutes = string(config.Enabled)
	c.BGP.ProgramClusterRoutes = string(config.Disabled)
	r, err := Render(c, "node-1", config.R333, Options{BIRD: br, KernelImportFilter: true, Log: discard()})
	if err != nil {
		t.Fatalf("BIRD %s kernel import filter: %v", br, err)
	}
	add("shape_kernel_import_filter", r)
	r, err = Render(testCluster("noencap"), "node-1", config.R333, Options{BIRD: br, Timers: holdTimers, Log: discard()})
	if err != nil {
		t.Fatalf("BIRD %s hold time: %v", br, err)
	}
	add("shape_hold9", r)
	return out, refused
}

// checkReleaseSyntax: what differs per major is where it should be.
func checkReleaseSyntax(t *testing.T, br release.Name, name string, r Rendered) {
	t.Helper()
	conf := string(r.Config)
	if br.TwoDaemons() {
		if strings.Contains(conf+string(r.Config6), "ipv4 {") || strings.Contains(conf+string(r.Config6), "ipv6 {") {
			t.Errorf("BIRD %s %s: channels rendered for a release without them", br, name)
		}
		for _, blk := range append(append([]string{}, blocksNoEn6...), blocksIPIP...) {
			if strings.Contains(blk, ":") && strings.Contains(conf, blk) {
				t.Errorf("BIRD %s %s: IPv6 block %s in bird's (IPv4) config", br, name, blk)
			}
		}
		for _, blk := range append(append([]string{}, blocksNoEn4...), blocksIPIP...) {
			if strings.Contains(string(r.Config6), blk) {
				t.Errorf("BIRD %s %s: IPv4 block %s in bird6's config", br, name, blk)
			}
		}
		return
	}
	if !strings.Contains(conf, "# BIRD release "+string(br)) {
		t.Errorf("BIRD %s %s: header does not name the BIRD release", br, name)
	}
}

func TestGoldenPerRelease(t *testing.T) {
	for _, br := range releaseGoldens {
		gs, refused := releaseRenders(t, br)
		if tunnels, _ := br.TunnelRoutes(); !tunnels && refused == 0 {
			t.Errorf("BIRD %s: guard: no render was refused, so the refusal is untested", br)
		}
		for _, g := range gs {
			checkGolden(t, filepath.Join("bird-"+string(br), g.name), g.conf)
		}
	}
}

// TestReleaseParses runs each release's own `bird -p` (inside its rootfs's
// loader and libraries) on that release's goldens; a release that is not
// prepared (ci/bird-releases) skips with its name.
func TestReleaseParses(t *testing.T) {
	for _, br := range append([]release.Name{release.BIRD20}, releaseGoldens...) {
		t.Run(string(br), func(t *testing.T) {
			rel := birdtest.NeedRelease(t, string(br))
			var gs []releaseGolden
			if br == release.BIRD20 {
				for _, g := range allRenders(t) {
					gs = append(gs, releaseGolden{g.name, "bird", g.conf})
				}
			} else {
				gs, _ = releaseRenders(t, br)
			}
			for _, g := range gs {
				if err := rel.Validate(g.daemon, g.conf); err != nil {
					t.Errorf("%s (%s) %s -p rejects %s: %v", br, rel.Package, g.daemon, g.name, err)
				}
			}
			t.Logf("BIRD %s (%s): %d configs accepted by its own bird -p", br, rel.Package, len(gs))
		})
	}
	// Positive control: a config each release must reject is rejected, so
	// an accepting Validate is not vacuous.
	rel := birdtest.NeedRelease(t, string(release.BIRD31))
	c := testCluster("ipip")
	c.BGP.ProgramClusterRoutes = string(config.Enabled)
	r, err := Render(c, "node-1", config.R333, Options{Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	if err := rel.Validate("bird", r.Config); err == nil || !strings.Contains(err.Error(), "ONLINK") {
		t.Errorf("BIRD 3.1 accepted the 2.0 tunnel filter (onlink), or failed for another reason: %v", err)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
