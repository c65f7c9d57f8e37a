// Conformance: a 4-node mesh rendered for each Calico release, held to what
// that release's confd renders, as literal expectations. Each fact names the
// Calico file and commit it was read from (release-v3.31 @ 3cdeae8f7ace,
// release-v3.32 @ de60d98e97a7, release-v3.33 @ 6609dea54713); the words are
// birdcage's own. docs/conformance.md tables the same facts.
package confd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// conformanceCluster: four nodes whose addresses order differently as
// strings and as numbers ("10.0.0.9" is the greatest string, the smallest
// number), an IPIP and a no-encap pool, a ToR BGPPeer for every node, a
// global BGPPeer and a node-specific BGPPeer at Calico nodes' addresses.
func conformanceCluster(bgpField string) *datastore.Cluster {
	c := &datastore.Cluster{}
	for i, ip := range []string{"10.0.0.9", "10.0.0.10", "10.0.0.11", "10.0.0.100"} {
		c.Nodes = append(c.Nodes, datastore.Node{Name: fmt.Sprintf("node-%d", i+1), IPv4Address: ip + "/24",
			Uplinks: []datastore.Uplink{{Interface: "eth1", Address: fmt.Sprintf("172.31.%d.2/30", i+1)}}})
		c.Blocks = append(c.Blocks, datastore.BlockAffinity{CIDR: fmt.Sprintf("192.168.%d.0/26", i+1), Node: fmt.Sprintf("node-%d", i+1)},
			datastore.BlockAffinity{CIDR: fmt.Sprintf("10.244.%d.0/26", i+1), Node: fmt.Sprintf("node-%d", i+1)})
	}
	c.Pools = []datastore.IPPool{poolIPIP, poolNoEnc4}
	c.BGP.ProgramClusterRoutes = bgpField
	return c
}

// sessionBlock returns the text of `protocol bgp NAME ... }`.
func sessionBlock(t *testing.T, conf, name string) string {
	t.Helper()
	i := strings.Index(conf, "protocol bgp "+name+" from")
	if i < 0 {
		t.Fatalf("no session %s in:\n%s", name, conf)
	}
	j := strings.Index(conf[i:], "\n}\n")
	if j < 0 {
		j = len(conf) - i - 2
	}
	return conf[i : i+j+2]
}

func TestConformanceMeshPerRelease(t *testing.T) {
	// Passive, per node: `passive on` toward every mesh peer whose address
	// is a greater string than the node's own (bird.cfg.template, mesh
	// section, `gt $onode_ip $node_ip` @ 3cdeae8f7ace; processMeshPeers
	// `peerIP > currentNodeIP` in bgp_processor.go @ de60d98e97a7 and
	// 6609dea54713). As strings: 10.0.0.10 < 10.0.0.100 < 10.0.0.11 <
	// 10.0.0.9.
	passiveToward := map[string][]string{
		"node-1": {},                                      // 10.0.0.9: the greatest string
		"node-2": {"10.0.0.9", "10.0.0.11", "10.0.0.100"}, // 10.0.0.10: the least
		"node-3": {"10.0.0.9"},                            // 10.0.0.11
		"node-4": {"10.0.0.9", "10.0.0.11"},               // 10.0.0.100
	}
	addrs := []string{"10.0.0.9", "10.0.0.10", "10.0.0.11", "10.0.0.100"}

	type facts struct {
		// calico_kernel_programming gives BGP routes krt_metric 1024 and
		// the exports carry it as bgp_local_pref: not in 3.31
		// (bird_ipam.cfg.template sets no krt_metric @ 3cdeae8f7ace), from
		// 3.32 (SetMetricForBGPRoutes and buildExportFilter in
		// bgp_processor.go @ de60d98e97a7, 6609dea54713).
		metric1024 bool
		// The iBGP export rejects tunl0 routes when BGPConfiguration
		// leaves IPIP to Felix: only 3.33 (IBGPExportFilterForTunnelRoutes
		// @ 6609dea54713); 3.31 and 3.32 reject only *.cali and *.calico
		// (reject_tunnel_routes in bird_ipam.cfg.template @ 3cdeae8f7ace,
		// de60d98e97a7).
		tunl0Arm bool
		// Mesh sessions carry `ttl security off; multihop;`: 3.33 only
		// (processMeshPeers TTLSecurity "off" @ 6609dea54713; absent from
		// the mesh in bird.cfg.template @ 3cdeae8f7ace and processMeshPeers
		// @ de60d98e97a7).
		meshTTLOff bool
		// The sessions' debug at the default log level (LOGGING in
		// bird.cfg.template @ 3cdeae8f7ace; DebugMode @ de60d98e97a7;
		// PeerDebugMode @ 6609dea54713).
		debug string
		// BIRD programs the IPIP pool's routes with the field unset: 3.31
		// (no field), 3.32 (default Enabled: bgpconfig.go @ de60d98e97a7),
		// not 3.33 (default EnabledNoEncapOnly: bgpconfig.go @
		// 6609dea54713).
		birdIPIP bool
	}
	want := map[config.Release]facts{
		config.R331: {metric1024: false, tunl0Arm: false, meshTTLOff: false, debug: "{ states }", birdIPIP: true},
		config.R332: {metric1024: true, tunl0Arm: false, meshTTLOff: false, debug: "{ states }", birdIPIP: true},
		config.R333: {metric1024: true, tunl0Arm: true, meshTTLOff: true, debug: "{ states, routes, filters, events }", birdIPIP: false},
	}
	bird, _ := exec.LookPath("bird")
	dir := t.TempDir()
	for _, rel := range config.Releases {
		w := want[rel]
		c := conformanceCluster("")
		for i, n := range c.Nodes {
			r, err := Render(c, n.Name, rel, Options{Log: discard()})
			if err != nil {
				t.Fatal(err)
			}
			conf := string(r.Config)
			what := fmt.Sprintf("%s %s", rel, n.Name)

			// Timers, the same in every release's bgp_template
			// (bird.cfg.template @ 3cdeae8f7ace, de60d98e97a7;
			// node/filesystem/.../bird.cfg.template @ 6609dea54713): connect
			// delay 2, connect retry 5, error wait 5,30, graceful restart;
			// no hold or keepalive time (only a BGPPeer's keepaliveTime
			// adds one).
			tmpl, ok := templateBody(conf, "bgp_template")
			if !ok {
				t.Fatalf("%s: no bgp_template", what)
			}
			for _, line := range []string{"connect delay time 2;", "connect retry time 5;", "error wait time 5, 30;", "graceful restart;", "debug " + w.debug + ";"} {
				if !strings.Contains(tmpl, "\n  "+line+"\n") {
					t.Errorf("%s: bgp_template lacks %q", what, line)
				}
			}
			if strings.Contains(conf, "hold time") || strings.Contains(conf, "keepalive time") {
				t.Errorf("%s: a hold or keepalive time is rendered; Calico renders none by default", what)
			}
			if len(r.Departures) != 0 {
				t.Errorf("%s: departures %q from the release by default", what, r.Departures)
			}

			// Mesh sessions: passive exactly toward greater strings; every
			// session `add paths on` and `gateway recursive` (bgp_template
			// @ all three commits).
			pass := map[string]bool{}
			for _, a := range passiveToward[n.Name] {
				pass[a] = true
			}
			for j, a := range addrs {
				if j == i {
					continue
				}
				blk := sessionBlock(t, conf, "Mesh_"+strings.ReplaceAll(a, ".", "_"))
				if got := strings.Contains(blk, "\n  passive on;"); got != pass[a] {
					t.Errorf("%s: mesh session to %s passive=%v, want %v (string %q > %q is %v)", what, a, got, pass[a], a, addrs[i], a > addrs[i])
				}
				for _, line := range []string{"\n    add paths on;", "\n    gateway recursive;"} {
					if !strings.Contains(blk, line) {
						t.Errorf("%s: mesh session to %s lacks %q", what, a, strings.TrimSpace(line))
					}
				}
				if got := strings.Contains(blk, "\n  ttl security off;\n  multihop;"); got != w.meshTTLOff {
					t.Errorf("%s: mesh session to %s has ttl security off + multihop=%v, want %v", what, a, got, w.meshTTLOff)
				}
				if got := strings.Contains(blk, "bgp_local_pref = 2147483647 - krt_metric;"); got != w.metric1024 {
					t.Errorf("%s: mesh export carries the metric in bgp_local_pref=%v, want %v", what, got, w.metric1024)
				}
			}
			for _, p := range r.Peers {
				if p.Passive != pass[p.Address.String()] {
					t.Errorf("%s: Rendered.Peers %s Passive=%v, want %v", what, p.Protocol, p.Passive, pass[p.Address.String()])
				}
			}

			// The kernel filter's metric rule and the kernel protocol's
			// metric 0 (so BIRD 2 writes each route's krt_metric).
			kf := conf[strings.Index(conf, "filter calico_kernel_programming {"):]
			kf = kf[:strings.Index(kf, "\n}\n")]
			if got := strings.Contains(kf, "if ( source = RTS_BGP && !defined(krt_metric) ) then {\n    krt_metric = 1024;\n    if defined(bgp_local_pref) then krt_metric = 2147483647 - bgp_local_pref;"); got != w.metric1024 {
				t.Errorf("%s: kernel filter sets krt_metric 1024 for BGP routes=%v, want %v", what, got, w.metric1024)
			}
			if strings.Count(conf, "\n  metric 0;\n") != 2 {
				t.Errorf("%s: both kernel protocols must run at metric 0", what)
			}
			wantMetric := map[bool]int{false: 0, true: 1024}[w.metric1024]
			if r.Policy.KernelMetric != wantMetric || RouteMetric(c.BGP, rel) != wantMetric {
				t.Errorf("%s: route metric %d / %d, want %d", what, r.Policy.KernelMetric, RouteMetric(c.BGP, rel), wantMetric)
			}

			// The tunl0 arm, and who programs the IPIP pool.
			if got := strings.Contains(conf, `if ( ifname ~ "tunl0" ) then reject;`); got != w.tunl0Arm {
				t.Errorf("%s: tunl0 arm=%v, want %v", what, got, w.tunl0Arm)
			}
			if got := r.Policy.BIRDOwns(poolIPIP); got != w.birdIPIP {
				t.Errorf("%s: BIRD programs the IPIP pool=%v, want %v", what, got, w.birdIPIP)
			}

			if bird != "" {
				f := filepath.Join(dir, fmt.Sprintf("%s_%s.conf", rel, n.Name))
				if err := os.WriteFile(f, r.Config, 0o644); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command(bird, "-p", "-c", f).CombinedOutput(); err != nil {
					t.Errorf("%s: bird -p: %v: %s", what, err, out)
				}
			}
		}
	}
}

// TestConformanceFieldPerRelease: what BGPConfiguration.programClusterRoutes
// values do to the kernel filter and the tunl0 arm in each release.
func TestConformanceFieldPerRelease(t *testing.T) {
	for _, tc := range []struct {
		rel               config.Release
		field             string
		birdIPIP, birdNoE bool
		tunl0             bool
	}{
		// 3.31: no field; BIRD programs every non-VXLAN pool whatever is
		// stored (bird_ipam.cfg.template @ 3cdeae8f7ace).
		{config.R331, "Disabled", true, true, false},
		{config.R331, "EnabledNoEncapOnly", true, true, false},
		// 3.32: "Disabled" rejects both classes in the kernel filter;
		// anything else is Enabled (processIPPools @ de60d98e97a7). No
		// tunl0 arm even when Felix owns IPIP.
		{config.R332, "Disabled", false, false, false},
		{config.R332, "EnabledNoEncapOnly", true, true, false},
		{config.R332, "Sometimes", true, true, false},
		// 3.33: the four values; unknown is the default EnabledNoEncapOnly
		// (clusterRoutePolicyFromBGPConfig @ 6609dea54713).
		{config.R333, "Disabled", false, false, true},
		{config.R333, "EnabledIPIPOnly", true, false, false},
		{config.R333, "Enabled", true, true, false},
		{config.R333, "Sometimes", false, true, true},
	} {
		c := conformanceCluster(tc.field)
		r, err := Render(c, "node-1", tc.rel, Options{Log: discard()})
		if err != nil {
			t.Fatal(err)
		}
		conf := string(r.Config)
		what := fmt.Sprintf("%s field %q", tc.rel, tc.field)
		for _, p := range []struct {
			pool datastore.IPPool
			want bool
		}{{poolIPIP, tc.birdIPIP}, {poolNoEnc4, tc.birdNoE}} {
			rejected := strings.Contains(conf, "  if ( net ~ "+p.pool.CIDR+" ) then reject;")
			if rejected == p.want {
				t.Errorf("%s: pool %s BIRD programs=%v, kernel filter rejects=%v", what, p.pool.Name, p.want, rejected)
			}
		}
		if got := strings.Contains(conf, `if ( ifname ~ "tunl0" ) then reject;`); got != tc.tunl0 {
			t.Errorf("%s: tunl0 arm=%v, want %v", what, got, tc.tunl0)
		}
	}
}

// TestConformancePeers: BGPPeers are `ttl security off; multihop;` with
// `gateway recursive` in every release (bird.cfg.template @ 3cdeae8f7ace;
// buildPeer TTLSecurity "off" @ de60d98e97a7, 6609dea54713); a global peer
// at a Calico node's address is passive toward a greater string, a
// node-specific one never is (buildPeer: mesh, global and local_workload
// types only).
func TestConformancePeers(t *testing.T) {
	for _, rel := range config.Releases {
		c := conformanceCluster("")
		off := false
		c.BGP.NodeToNodeMeshEnabled = &off
		c.Peers = []datastore.BGPPeer{
			{Name: "tor", PeerIP: "172.31.1.1", ASNumber: 65101},                             // on node-1's uplink subnet
			{Name: "to-node-4", PeerIP: "10.0.0.100", ASNumber: 64512},                       // global, a Calico node
			{Name: "to-node-3-from-2", Node: "node-2", PeerIP: "10.0.0.11", ASNumber: 64512}, // node-specific
		}
		for _, node := range []string{"node-1", "node-2"} {
			r, err := Render(c, node, rel, Options{Log: discard()})
			if err != nil {
				t.Fatal(err)
			}
			conf := string(r.Config)
			what := fmt.Sprintf("%s %s", rel, node)
			if node == "node-1" {
				tor := sessionBlock(t, conf, "Global_172_31_1_1")
				for _, line := range []string{"\n  ttl security off;\n  multihop;\n", "\n  source address 172.31.1.2;", "\n    gateway recursive;", "\n    add paths on;"} {
					if !strings.Contains(tor, line) {
						t.Errorf("%s: ToR session lacks %q:\n%s", what, strings.TrimSpace(line), tor)
					}
				}
				if strings.Contains(tor, "passive on") {
					t.Errorf("%s: the ToR session is passive; Calico renders passive only toward Calico nodes", what)
				}
				// node-1 is 10.0.0.9: 10.0.0.100 is a smaller string.
				if strings.Contains(sessionBlock(t, conf, "Global_10_0_0_100"), "passive on") {
					t.Errorf("%s: global peer 10.0.0.100 is passive, but \"10.0.0.100\" < \"10.0.0.9\"", what)
				}
				// Knob: DirectPeers restores the direct ToR session.
				rd, err := Render(c, node, rel, Options{Log: discard(), Knobs: Knobs{DirectPeers: true}})
				if err != nil {
					t.Fatal(err)
				}
				d := sessionBlock(t, string(rd.Config), "Global_172_31_1_1")
				if strings.Contains(d, "multihop") || !strings.Contains(d, "gateway direct;") || len(rd.Departures) != 1 {
					t.Errorf("%s: DirectPeers knob: %q, departures %q", what, d, rd.Departures)
				}
				continue
			}
			// node-2 is 10.0.0.10: 10.0.0.100 is a greater string.
			if !strings.Contains(sessionBlock(t, conf, "Global_10_0_0_100"), "\n  passive on;") {
				t.Errorf("%s: global peer at Calico node 10.0.0.100 must be passive from 10.0.0.10", what)
			}
			if strings.Contains(sessionBlock(t, conf, "Node_10_0_0_11"), "passive on") {
				t.Errorf("%s: node-specific peer is passive; Calico never makes those passive", what)
			}
			// Knob: NoPassive removes every passive.
			rn, err := Render(c, node, rel, Options{Log: discard(), Knobs: Knobs{NoPassive: true}})
			if err != nil {
				t.Fatal(err)
			}
			if regexp.MustCompile(`passive on`).MatchString(string(rn.Config)) || strings.Join(rn.Departures, ",") != "no passive mesh" {
				t.Errorf("%s: NoPassive knob left a passive session, or departures %q", what, rn.Departures)
			}
		}
	}
}
