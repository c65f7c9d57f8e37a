// These tests hold the shared facts in place: what each programClusterRoutes
// value means, and how each release's components resolve unset, known and
// unknown values.
package config

import (
	"bytes"
	"errors"
	"fmt"
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

// TestResolvePerRelease holds each release's resolution as literals, read
// from Calico's branches: release-v3.31 @ 3cdeae8f7ace, release-v3.32 @
// de60d98e97a7, release-v3.33 @ 6609dea54713 (files named in Resolve).
func TestResolvePerRelease(t *testing.T) {
	type want struct {
		raw  string
		eff  ProgramClusterRoutes
		logs bool // logged at Warn
	}
	cases := map[Release]map[Component][]want{
		R331: {
			// Felix 3.31: oneof(Enabled,Disabled);Disabled, case-insensitive,
			// invalid replaced by the default with a warning.
			Programmer: {{"", Disabled, false}, {"Enabled", Enabled, false}, {"enabled", Enabled, false}, {"Disabled", Disabled, false},
				{"EnabledIPIPOnly", Disabled, true}, {"EnabledNoEncapOnly", Disabled, true}, {"Sometimes", Disabled, true}},
			// confd 3.31: no BGPConfiguration field; BIRD programs all.
			BIRD: {{"", Enabled, false}, {"Disabled", Enabled, false}, {"EnabledNoEncapOnly", Enabled, false}, {"Sometimes", Enabled, false}},
		},
		R332: {
			Programmer: {{"", Disabled, false}, {"Enabled", Enabled, false}, {"DISABLED", Disabled, false},
				{"EnabledIPIPOnly", Disabled, true}, {"Sometimes", Disabled, true}},
			// confd 3.32: only "Disabled" disables, silently.
			BIRD: {{"", Enabled, false}, {"Enabled", Enabled, false}, {"Disabled", Disabled, false}, {"disabled", Enabled, false},
				{"EnabledNoEncapOnly", Enabled, false}, {"EnabledIPIPOnly", Enabled, false}, {"Sometimes", Enabled, false}},
		},
		R333: {
			Programmer: {{"", EnabledIPIPOnly, false}, {"Enabled", Enabled, false}, {"Disabled", Disabled, false},
				{"EnabledNoEncapOnly", EnabledNoEncapOnly, false}, {"enabledipiponly", EnabledIPIPOnly, false}, {"Sometimes", EnabledIPIPOnly, true}},
			// confd 3.33: exact match; anything else is the default, warned.
			BIRD: {{"", EnabledNoEncapOnly, false}, {"Enabled", Enabled, false}, {"Disabled", Disabled, false},
				{"EnabledIPIPOnly", EnabledIPIPOnly, false}, {"EnabledNoEncapOnly", EnabledNoEncapOnly, false},
				{"enabled", EnabledNoEncapOnly, true}, {" Enabled", EnabledNoEncapOnly, true}, {"Sometimes", EnabledNoEncapOnly, true}},
		},
	}
	for r, byComp := range cases {
		for c, ws := range byComp {
			for _, w := range ws {
				var buf bytes.Buffer
				log := slog.New(slog.NewTextHandler(&buf, nil)) // Info and above
				if got := Resolve(w.raw, r, c, log); got != w.eff {
					t.Errorf("%s %s %q: got %s, want %s", r, c, w.raw, got, w.eff)
				}
				if logged := strings.Contains(buf.String(), "WARN"); logged != w.logs {
					t.Errorf("%s %s %q: warned %v, want %v: %q", r, c, w.raw, logged, w.logs, buf.String())
				}
			}
		}
	}
	// The two defaults of each release are complementary (one owner per class).
	for _, r := range Releases {
		p, b := r.DefaultProgramClusterRoutes(Programmer), r.DefaultProgramClusterRoutes(BIRD)
		if p.ProgramIPIPClusterRoutes() == b.ProgramIPIPClusterRoutes() || p.ProgramNoEncapClusterRoutes() == b.ProgramNoEncapClusterRoutes() {
			t.Errorf("release %s defaults %s/%s are not complementary", r, p, b)
		}
	}
}

func TestValidateField(t *testing.T) {
	for _, tc := range []struct {
		r   Release
		c   Component
		raw string
		err string // "" for valid
	}{
		{R331, BIRD, "Enabled", `BGPConfiguration.programClusterRoutes "Enabled": release 3.31 has no such field`},
		{R331, Programmer, "Enabled", ""},
		{R332, Programmer, "EnabledIPIPOnly", `FelixConfiguration.programClusterRoutes "EnabledIPIPOnly": release 3.32 admits Enabled, Disabled`},
		{R332, BIRD, "Disabled", ""},
		{R333, BIRD, "EnabledNoEncapOnly", ""},
		{R333, BIRD, "enabled", `BGPConfiguration.programClusterRoutes "enabled": release 3.33 admits Enabled, Disabled, EnabledIPIPOnly, EnabledNoEncapOnly`},
		{R333, Programmer, "", ""},
	} {
		err := tc.r.ValidateField(tc.c, tc.raw)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s %s %q: %v", tc.r, tc.c, tc.raw, err)
		case tc.err != "" && (err == nil || !errors.Is(err, ErrInvalidValue) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s %s %q: got %v, want ErrInvalidValue with %q", tc.r, tc.c, tc.raw, err, tc.err)
		}
	}
}

func TestReleases(t *testing.T) {
	if got := fmt.Sprint(Releases); got != "[3.31 3.32 3.33]" {
		t.Errorf("Releases = %s", got)
	}
	if R331.ClaimsBIRDTunnelRoutes() || R332.ClaimsBIRDTunnelRoutes() || !R333.ClaimsBIRDTunnelRoutes() {
		t.Error("only 3.33 claims BIRD's tunl0 routes")
	}
	_, err := ParseRelease("3.34")
	if !errors.Is(err, ErrUnknownRelease) || !strings.Contains(err.Error(), "3.31, 3.32, 3.33 (aliases: new = 3.33, pre-3.33 = 3.32, previous = 3.32)") {
		t.Errorf("ParseRelease(3.34): %v", err)
	}
	for in, want := range map[string]Release{"3.31": R331, "3.32": R332, "3.33": R333, "pre-3.33": R332, "previous": R332, "new": R333} {
		if r, err := ParseRelease(in); err != nil || r != want {
			t.Errorf("ParseRelease(%s) = %v, %v; want %s", in, r, err, want)
		}
	}
	if string(Pre333) != "3.32" {
		t.Errorf("Pre333 is %q; it names the real release 3.32", Pre333)
	}
	// confd-side facts (confd.go), literal.
	for _, tc := range []struct {
		r                   Release
		metric              int
		localPref, tunl0, t bool
		debug               string
	}{
		{R331, 0, false, false, false, "{ states }"},
		{R332, 1024, true, false, false, "{ states }"},
		{R333, 1024, true, true, true, "{ states, routes, filters, events }"},
	} {
		if tc.r.BGPRouteMetric() != tc.metric || tc.r.CarriesPriorityInLocalPref() != tc.localPref ||
			tc.r.RejectsTunl0WhenFelixOwnsIPIP() != tc.tunl0 || tc.r.MeshTTLSecurityOff() != tc.t || tc.r.PeerDebug() != tc.debug || !tc.r.PassiveMesh() {
			t.Errorf("%s confd facts: metric %d localpref %v tunl0 %v meshTTL %v debug %q", tc.r, tc.r.BGPRouteMetric(),
				tc.r.CarriesPriorityInLocalPref(), tc.r.RejectsTunl0WhenFelixOwnsIPIP(), tc.r.MeshTTLSecurityOff(), tc.r.PeerDebug())
		}
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
