package confd

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/internal/calico/config"
)

// TestBGPTimersRendered: a hold/keepalive pair lands once, in the BGP
// template every session is built from, for nodes (BIRD 2 and 1.6 syntax)
// and routers alike; zero timers render neither line, so BIRD keeps its
// own defaults.
func TestBGPTimersRendered(t *testing.T) {
	want := []string{"\n  hold time 9;\n", "\n  keepalive time 3;\n"}
	check := func(name string, conf []byte, template string) {
		t.Helper()
		s := string(conf)
		body, ok := templateBody(s, template)
		if !ok {
			t.Fatalf("%s: no %q block", name, template)
		}
		for _, w := range want {
			if strings.Count(s, w) != 1 || !strings.Contains(body, w) {
				t.Errorf("%s: %q appears %d times, want once, inside %q", name, strings.TrimSpace(w), strings.Count(s, w), template)
			}
		}
		// Guard: every session inherits the template (else the timers
		// would reach only some of them).
		protos := regexp.MustCompile(`(?m)^protocol bgp \S+ from (\S+) \{`).FindAllStringSubmatch(s, -1)
		all := regexp.MustCompile(`(?m)^protocol bgp `).FindAllString(s, -1)
		if len(protos) == 0 || len(protos) != len(all) {
			t.Errorf("%s: %d bgp protocols, %d from a template: the timers would not reach every session", name, len(all), len(protos))
		}
		for _, p := range protos {
			if p[1] != template {
				t.Errorf("%s: a session is built from %s, not %s", name, p[1], template)
			}
		}
	}
	c := testCluster("both")
	for _, br := range []release.Name{release.Default, release.BIRD16} {
		r, err := Render(c, "node-1", config.R333, Options{BIRD: br, Timers: holdTimers, Log: discard()})
		if err != nil {
			t.Fatalf("BIRD %s: %v", br, err)
		}
		check(fmt.Sprintf("node, BIRD %s", br), r.Config, "bgp_template")
		if r.Config6 != nil {
			check(fmt.Sprintf("node, BIRD %s bird6", br), r.Config6, "bgp_template")
		}
		// Positive control: the same render without them has neither line.
		r0, err := Render(c, "node-1", config.R333, Options{BIRD: br, Log: discard()})
		if err != nil {
			t.Fatal(err)
		}
		if s := string(r0.Config) + string(r0.Config6); strings.Contains(s, "hold time") || strings.Contains(s, "keepalive time") {
			t.Errorf("BIRD %s: zero timers rendered a hold or keepalive time", br)
		}
	}
	rt := Router{Name: "tor-a", RouterID: "172.31.11.1", AS: 65101, Timers: holdTimers,
		Neighbors: []Neighbor{{Name: "node-1", Address: "172.31.11.2", AS: 65001}, {Address: "fd00:31:11::2", AS: 65001}}}
	rc, err := RenderRouter(rt)
	if err != nil {
		t.Fatal(err)
	}
	check("router", rc, "peer_template")
	rt.Timers = Timers{}
	if rc, err = RenderRouter(rt); err != nil || strings.Contains(string(rc), "hold time") {
		t.Errorf("router with zero timers: err %v, hold time rendered=%v", err, strings.Contains(string(rc), "hold time"))
	}
}

// templateBody is the text of `template bgp NAME { ... }` up to its
// closing brace.
func templateBody(conf, name string) (string, bool) {
	i := strings.Index(conf, "template bgp "+name+" {")
	if i < 0 {
		return "", false
	}
	j := strings.Index(conf[i:], "\n}")
	if j < 0 {
		return "", false
	}
	return conf[i : i+j+1], true
}

// TestBGPTimerErrors: timers BIRD would refuse, or that cannot hold a
// session up, are refused by node and router renders alike with
// ErrInvalidTimers and the valid form; valid pairs pass.
func TestBGPTimerErrors(t *testing.T) {
	c := testCluster("noencap")
	rt := Router{Name: "tor-a", RouterID: "172.31.11.1", AS: 65101, Neighbors: []Neighbor{{Address: "172.31.11.2", AS: 65001}}}
	for _, tc := range []struct {
		timers Timers
		want   string // "" means valid
	}{
		{Timers{HoldTime: 9, KeepaliveTime: 3}, ""},
		{Timers{HoldTime: 3}, ""},
		{Timers{KeepaliveTime: 80}, ""}, // under BIRD's default hold of 240 s
		{Timers{}, ""},
		{Timers{HoldTime: 2}, "hold time 2 s: want 0 (BIRD's default, 240 s) or 3..65535 s"},
		{Timers{HoldTime: -1}, "hold time -1 s"},
		{Timers{HoldTime: 70000}, "hold time 70000 s"},
		{Timers{HoldTime: 9, KeepaliveTime: 9}, "keepalive time 9 s is not shorter than the hold time 9 s"},
		{Timers{HoldTime: 9, KeepaliveTime: 12}, "keepalive time 12 s is not shorter than the hold time 9 s"},
		{Timers{KeepaliveTime: 240}, "hold time 240 s (BIRD's default)"},
		{Timers{HoldTime: 9, KeepaliveTime: -3}, "keepalive time -3 s"},
	} {
		_, nerr := Render(c, "node-1", config.R333, Options{Timers: tc.timers, Log: discard()})
		rt.Timers = tc.timers
		_, rerr := RenderRouter(rt)
		for what, err := range map[string]error{"node": nerr, "router": rerr} {
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s %+v: %v, want it accepted", what, tc.timers, err)
			case tc.want != "" && (!errors.Is(err, ErrInvalidTimers) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s %+v: err %v, want ErrInvalidTimers saying %q", what, tc.timers, err, tc.want)
			}
		}
	}
}
