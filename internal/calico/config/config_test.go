// These tests hold the one shared fact in place: what each programClusterRoutes
// value means, and that an unset and an unknown value resolve identically to
// the release default for both components.
package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestAccessors(t *testing.T) {
	for _, tc := range []struct {
		v             ProgramClusterRoutes
		ipip, noEncap bool
	}{
		{Disabled, false, false},
		{EnabledIPIPOnly, true, false},
		{EnabledNoEncapOnly, false, true},
		{Enabled, true, true},
	} {
		if got := tc.v.ProgramIPIPClusterRoutes(); got != tc.ipip {
			t.Errorf("%s.ProgramIPIPClusterRoutes() = %v, want %v", tc.v, got, tc.ipip)
		}
		if got := tc.v.ProgramNoEncapClusterRoutes(); got != tc.noEncap {
			t.Errorf("%s.ProgramNoEncapClusterRoutes() = %v, want %v", tc.v, got, tc.noEncap)
		}
	}
}

func TestResolveDefaultsAndUnknownValues(t *testing.T) {
	want := map[Release]map[Component]ProgramClusterRoutes{
		Pre333: {Programmer: Disabled, BIRD: Enabled},
		R333:   {Programmer: EnabledIPIPOnly, BIRD: EnabledNoEncapOnly},
	}
	for r, byComp := range want {
		for c, def := range byComp {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			if got := Resolve("", r, c, log); got != def {
				t.Errorf("%s %s unset: got %s, want %s", r, c, got, def)
			}
			if buf.Len() != 0 {
				t.Errorf("%s %s unset: logged %q; an unset field is not worth a warning", r, c, buf.String())
			}
			for _, unknown := range []string{"EnabledVXLANOnly", "enabled", " Enabled"} {
				buf.Reset()
				if got := Resolve(unknown, r, c, log); got != def {
					t.Errorf("%s %s %q: got %s, want the default %s (same as unset)", r, c, unknown, got, def)
				}
				if !strings.Contains(buf.String(), "unknown programClusterRoutes value") {
					t.Errorf("%s %s %q: not logged: %q", r, c, unknown, buf.String())
				}
			}
			for _, v := range Values {
				if got := Resolve(string(v), r, c, nil); got != v {
					t.Errorf("%s %s %s: got %s", r, c, v, got)
				}
			}
		}
	}
	// The two defaults of each release are complementary (a supported pair).
	for _, r := range Releases {
		p, b := r.DefaultProgramClusterRoutes(Programmer), r.DefaultProgramClusterRoutes(BIRD)
		if p.ProgramIPIPClusterRoutes() == b.ProgramIPIPClusterRoutes() || p.ProgramNoEncapClusterRoutes() == b.ProgramNoEncapClusterRoutes() {
			t.Errorf("release %s defaults %s/%s are not complementary", r, p, b)
		}
	}
}

func TestReleases(t *testing.T) {
	if Pre333.ClaimsBIRDTunnelRoutes() || !R333.ClaimsBIRDTunnelRoutes() {
		t.Error("only 3.33 claims BIRD's tunl0 routes")
	}
	if _, err := ParseRelease("3.34"); err == nil || !strings.Contains(err.Error(), "pre-3.33, 3.33") {
		t.Errorf("ParseRelease(3.34): %v", err)
	}
	if r, err := ParseRelease("3.33"); err != nil || r != R333 {
		t.Errorf("ParseRelease(3.33) = %v, %v", r, err)
	}
}

func TestEffectiveFelixFields(t *testing.T) {
	if EffectiveDeviceRouteProtocol(0) != 80 || EffectiveDeviceRouteProtocol(99) != 99 {
		t.Error("deviceRouteProtocol: 0 means 80, else as given")
	}
	for in, want := range map[string]time.Duration{"": DefaultRouteRefreshInterval, "0s": 0, "1500ms": 1500 * time.Millisecond} {
		if got, err := EffectiveRouteRefreshInterval(in); err != nil || got != want {
			t.Errorf("routeRefreshInterval %q = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := EffectiveRouteRefreshInterval("-1s"); err == nil {
		t.Error("negative refresh interval accepted")
	}
}
