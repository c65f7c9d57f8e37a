// These tests hold the renderer to the ownership design: for every pool mix,
// every programClusterRoutes value (plus unset and unknown) and every
// release, the rendered kernel filter programs exactly the pools BIRD owns,
// the iBGP export reject has its tunl0 arm exactly when the programmer owns
// IPIP in 3.33, the deprecation warning appears once per render in which BIRD
// programs an IPIP pool, and BIRD itself accepts the file (`bird -p`).
package confd

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current renderer")

var (
	poolIPIP    = datastore.IPPool{Name: "ipip-pool", CIDR: "192.168.0.0/16", IPIPMode: datastore.EncapAlways, VXLANMode: datastore.EncapNever}
	poolNoEnc4  = datastore.IPPool{Name: "noencap-pool", CIDR: "10.244.0.0/16", IPIPMode: datastore.EncapNever, VXLANMode: datastore.EncapNever}
	poolNoEnc6  = datastore.IPPool{Name: "noencap-pool-v6", CIDR: "fd00:244::/48", IPIPMode: datastore.EncapNever, VXLANMode: datastore.EncapNever}
	blocksIPIP  = []string{"192.168.1.0/26", "192.168.2.0/26", "192.168.3.0/26"}
	blocksNoEn4 = []string{"10.244.1.0/26", "10.244.2.0/26", "10.244.3.0/26"}
	blocksNoEn6 = []string{"fd00:244:0:1::/122", "fd00:244:0:2::/122", "fd00:244:0:3::/122"}
)

// poolMixes are the pool sets every golden combination is rendered for; the
// no-encap mixes carry an IPv6 pool so both families come from one policy.
var poolMixes = []string{"ipip", "noencap", "both"}

// fieldValues are the four values plus unset ("") and an unknown value.
var fieldValues = []string{"Disabled", "EnabledIPIPOnly", "EnabledNoEncapOnly", "Enabled", "", "Bogus"}

func fieldName(v string) string {
	switch v {
	case "":
		return "unset"
	case "Bogus":
		return "unknown"
	}
	return v
}

// testCluster builds a three-node mesh cluster with the given pool mix.
func testCluster(mix string) *datastore.Cluster {
	c := &datastore.Cluster{}
	for i := 1; i <= 3; i++ {
		c.Nodes = append(c.Nodes, datastore.Node{
			Name:        fmt.Sprintf("node-%d", i),
			IPv4Address: fmt.Sprintf("10.0.0.%d/24", 10+i),
			IPv6Address: fmt.Sprintf("fd00::%d/64", 10+i),
		})
	}
	addBlocks := func(cidrs []string) {
		for i, b := range cidrs {
			c.Blocks = append(c.Blocks, datastore.BlockAffinity{CIDR: b, Node: fmt.Sprintf("node-%d", i+1)})
		}
	}
	if mix == "ipip" || mix == "both" {
		c.Pools = append(c.Pools, poolIPIP)
		addBlocks(blocksIPIP)
	}
	if mix == "noencap" || mix == "both" {
		c.Pools = append(c.Pools, poolNoEnc4, poolNoEnc6)
		addBlocks(blocksNoEn4)
		addBlocks(blocksNoEn6)
	}
	return c
}

// newCapture returns a logger that keeps the messages it is given.
func newCapture() (*slog.Logger, *[]string) {
	h := &captureHandler{msgs: new([]string)}
	return slog.New(h), h.msgs
}

type captureHandler struct{ msgs *[]string }

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	*h.msgs = append(*h.msgs, r.Message)
	return nil
}
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *captureHandler) WithGroup(string) slog.Handler      { return h }

type golden struct {
	name string
	conf []byte
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v (run `go test ./dataplane/confd -run Golden -update` to create it)", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendered config (rerun with -update if the change is intended):\n%s", path, diffLines(string(want), string(got)))
	}
}

// diffLines is a small line diff for failure messages.
func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out strings.Builder
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			fmt.Fprintf(&out, "line %d:\n  golden:   %s\n  rendered: %s\n", i+1, x, y)
		}
	}
	return out.String()
}

// allRenders renders every combination and the extra shapes, for the golden
// and the bird -p tests alike.
func allRenders(t *testing.T) []golden {
	t.Helper()
	var out []golden
	for _, mix := range poolMixes {
		for _, val := range fieldValues {
			for _, rel := range config.Releases {
				c := testCluster(mix)
				c.BGP.ProgramClusterRoutes = val
				log, msgs := newCapture()
				r, err := Render(c, "node-1", rel, Options{Log: log})
				if err != nil {
					t.Fatalf("render %s/%s/%s: %v", mix, fieldName(val), rel, err)
				}
				name := fmt.Sprintf("%s_%s_%s", mix, fieldName(val), rel)
				checkPolicy(t, name, c, rel, r, *msgs)
				out = append(out, golden{name, r.Config})
			}
		}
	}
	for _, x := range extraShapes(t) {
		out = append(out, x)
	}
	return out
}

// checkPolicy asserts the ownership decisions in one rendered config.
func checkPolicy(t *testing.T, name string, c *datastore.Cluster, rel config.Release, r Rendered, logged []string) {
	t.Helper()
	conf := string(r.Config)
	eff := config.Resolve(c.BGP.ProgramClusterRoutes, rel, config.BIRD, nil)
	if r.Policy.Effective != eff {
		t.Errorf("%s: effective value %s, want %s (config.Resolve)", name, r.Policy.Effective, eff)
	}
	birdIPIP := false
	for _, p := range c.Pools {
		owns := (p.IsIPIP() && eff.ProgramIPIPClusterRoutes()) || (p.IsNoEncap() && eff.ProgramNoEncapClusterRoutes())
		rejectLine := fmt.Sprintf("  if ( net ~ %s ) then reject;", p.CIDR)
		if got := strings.Contains(conf, rejectLine); got == owns {
			t.Errorf("%s: pool %s: BIRD owns=%v but kernel-filter reject present=%v", name, p.Name, owns, got)
		}
		if p.IsIPIP() && owns {
			birdIPIP = true
		}
	}
	// The tunl0 arm exists only in 3.33, when the programmer owns IPIP
	// (bgp_processor.go processIPPools @ 6609dea54713).
	if got, want := strings.Contains(conf, `if ( ifname ~ "tunl0" ) then reject;`), rel == config.R333 && !eff.ProgramIPIPClusterRoutes(); got != want {
		t.Errorf("%s: tunl0 arm of the iBGP reject present=%v, want %v (programmer owns IPIP=%v)", name, got, want, !eff.ProgramIPIPClusterRoutes())
	}
	for _, arm := range []string{`"*.cali"`, `"*.calico"`} {
		if !strings.Contains(conf, "if ( ifname ~ "+arm+" ) then reject;") {
			t.Errorf("%s: the %s arm of the iBGP reject is missing; it must be unconditional", name, arm)
		}
	}
	if got, want := strings.Contains(conf, "onlink = true;\n    ifname = \"tunl0\";\n    gw = bgp_next_hop;"), birdIPIP; got != want {
		t.Errorf("%s: tunnel statements present=%v, want %v", name, got, want)
	}
	wantWarn := 0
	if birdIPIP && rel.WarnsOnBIRDIPIP() {
		wantWarn = 1
	}
	if len(r.Warnings) != wantWarn {
		t.Errorf("%s: %d deprecation warnings returned, want %d: %q", name, len(r.Warnings), wantWarn, r.Warnings)
	}
	n := 0
	for _, m := range logged {
		if strings.HasPrefix(m, "DEPRECATED") {
			n++
		}
	}
	if n != wantWarn {
		t.Errorf("%s: %d deprecation warnings logged, want %d", name, n, wantWarn)
	}
	if !strings.Contains(conf, "metric 0;") {
		t.Errorf("%s: kernel metric is not 0 with kernelMetric unset", name)
	}
}

func TestGolden(t *testing.T) {
	for _, g := range allRenders(t) {
		checkGolden(t, g.name, g.conf)
	}
}

// TestDeprecationWarningEveryRender: the warning is per render, never once.
func TestDeprecationWarningEveryRender(t *testing.T) {
	c := testCluster("both")
	c.BGP.ProgramClusterRoutes = string(config.Enabled)
	log, msgs := newCapture()
	for i := 0; i < 3; i++ {
		r, err := Render(c, "node-2", config.R333, Options{Log: log})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "ipip-pool") {
			t.Fatalf("render %d: warnings %q, want one naming ipip-pool", i+1, r.Warnings)
		}
	}
	if len(*msgs) != 3 {
		t.Fatalf("3 renders logged %d lines, want 3: %q", len(*msgs), *msgs)
	}
	// No IPIP pool programmed by BIRD: no warning, in either release.
	c.BGP.ProgramClusterRoutes = string(config.EnabledNoEncapOnly)
	if r, _ := Render(c, "node-2", config.R333, Options{Log: log}); len(r.Warnings) != 0 {
		t.Fatalf("BIRD owns no IPIP pool but warned: %q", r.Warnings)
	}
}

func TestRenderErrors(t *testing.T) {
	c := testCluster("ipip")
	if _, err := Render(c, "node-9", config.R333, Options{}); err == nil || !strings.Contains(err.Error(), "node-1, node-2, node-3") {
		t.Errorf("unknown node: err %v, want one listing the nodes", err)
	}
	if _, err := Render(c, "node-1", "2.0", Options{}); err == nil || !strings.Contains(err.Error(), "pre-3.33") {
		t.Errorf("unknown release: err %v, want one listing the releases", err)
	}
	c.Pools[0].CIDR = "192.168.0.0/33"
	if _, err := Render(c, "node-1", config.R333, Options{}); err == nil || !strings.Contains(err.Error(), `ippool "ipip-pool": cidr`) {
		t.Errorf("bad pool cidr: err %v, want one naming the pool and field", err)
	}
	if _, err := RenderRouter(Router{Name: "tor-a", RouterID: "x", AS: 65001}); err == nil || !strings.Contains(err.Error(), "routerID") {
		t.Errorf("bad router id: err %v", err)
	}
}

// TestBirdParses runs `bird -p` (parse only) on every rendered config.
func TestBirdParses(t *testing.T) {
	bird, err := exec.LookPath("bird")
	if err != nil {
		t.Skip("bird not installed (Debian package bird2): cannot parse-check rendered configs")
	}
	dir := t.TempDir()
	for _, g := range allRenders(t) {
		f := filepath.Join(dir, g.name+".conf")
		if err := os.WriteFile(f, g.conf, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bird, "-p", "-c", f).CombinedOutput(); err != nil {
			t.Errorf("bird -p rejects %s: %v: %s", g.name, err, out)
		}
	}
}

// TestIPv6IPIPPoolNeverTunnelled: an IPv6 pool with ipipMode Always (which
// Calico's API refuses; the datastore can hold it) that BIRD owns is accepted
// into the kernel like no-encap, out of the uplink, never given the tunnel
// arm. confd sets krt_tunnel for IPv4 only (bgp_processor.go processIPPool,
// `forProgrammingKernel && ipVersion == 4`, release-v3.33 6609dea5); the
// 3.31 IPv6 template (bird6_ipam.cfg.template, 3cdeae8f) has no tunnel. The
// IPv4 IPIP pool in the same render is the positive control: it keeps the
// tunnel arm. On BIRD 1.6, which cannot write tunnel routes, the IPv6 pool
// alone renders (bird6.conf), since it needs no tunnel.
func TestIPv6IPIPPoolNeverTunnelled(t *testing.T) {
	v6ipip := datastore.IPPool{Name: "ipip-pool-v6", CIDR: "fd00:245::/112", IPIPMode: datastore.EncapAlways, VXLANMode: datastore.EncapNever}
	tunnelArm := func(cidr string) string {
		return fmt.Sprintf("if ( net ~ %s ) then {\n    # Own blocks", cidr)
	}
	for _, rel := range config.Releases {
		c := testCluster("ipip")
		c.Pools = append(c.Pools, v6ipip)
		c.BGP.ProgramClusterRoutes = string(config.Enabled)
		r, err := Render(c, "node-1", rel, Options{})
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		conf := string(r.Config)
		if !strings.Contains(conf, tunnelArm("192.168.0.0/16")) {
			t.Errorf("%s: control: the IPv4 IPIP pool lost its tunnel arm:\n%s", rel, conf)
		}
		if strings.Contains(conf, tunnelArm(v6ipip.CIDR)) {
			t.Errorf("%s: the IPv6 IPIP pool %s has the tunnel arm:\n%s", rel, v6ipip.CIDR, conf)
		}
		if want := fmt.Sprintf("if ( net ~ %s ) then accept;", v6ipip.CIDR); !strings.Contains(conf, want) {
			t.Errorf("%s: the IPv6 IPIP pool should be accepted like no-encap (%q):\n%s", rel, want, conf)
		}
		c.Pools = []datastore.IPPool{v6ipip}
		r, err = Render(c, "node-1", rel, Options{BIRD: release.BIRD16})
		if err != nil {
			t.Fatalf("%s on BIRD 1.6: an IPv6 IPIP pool needs no tunnel, yet: %v", rel, err)
		}
		if want := fmt.Sprintf("if ( net ~ %s ) then accept;", v6ipip.CIDR); !strings.Contains(string(r.Config6), want) {
			t.Errorf("%s on BIRD 1.6: bird6.conf should accept %s (%q):\n%s", rel, v6ipip.CIDR, want, r.Config6)
		}
	}
}
