package control

import (
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/calico/datastore"
)

func TestSettingsApply(t *testing.T) {
	var f datastore.FelixConfiguration
	var b datastore.BGPConfiguration
	s, err := ParseQualified([]string{"felix.programClusterRoutes=Enabled", "bgp.programClusterRoutes=Disabled", "bgp.kernelMetric=32", "bgp.nodeToNodeMeshEnabled=false"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.OnlyProgramClusterRoutes() {
		t.Error("kernelMetric is not programClusterRoutes")
	}
	if err := s.Apply(&f, &b); err != nil {
		t.Fatal(err)
	}
	if f.ProgramClusterRoutes != "Enabled" || b.ProgramClusterRoutes != "Disabled" || b.KernelMetric == nil || *b.KernelMetric != 32 ||
		b.NodeToNodeMeshEnabled == nil || *b.NodeToNodeMeshEnabled {
		t.Errorf("applied wrong: %+v %+v", f, b)
	}
	// An empty value unsets.
	if err := (Settings{BGP: []string{"kernelMetric="}}).Apply(&f, &b); err != nil || b.KernelMetric != nil {
		t.Errorf("unset kernelMetric: %v %v", err, b.KernelMetric)
	}
	if s, _ := ParseQualified([]string{"felix.programClusterRoutes=Enabled"}, false); !s.OnlyProgramClusterRoutes() {
		t.Error("only programClusterRoutes")
	}
}

func TestSettingsErrorsNameKeyAndValidValues(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want []string
	}{
		{Settings{Felix: []string{"programClusterRoutes=Bogus"}}, []string{"felix.programClusterRoutes", "Bogus", "Disabled, EnabledIPIPOnly, EnabledNoEncapOnly, Enabled"}},
		{Settings{Felix: []string{"programclusterroutes=Enabled"}}, []string{"felix.programclusterroutes", "did you mean programClusterRoutes"}},
		{Settings{BGP: []string{"nosuch=1"}}, []string{"bgp.nosuch", "asNumber, bgpEnabled, kernelMetric, nodeToNodeMeshEnabled, programClusterRoutes"}},
		{Settings{BGP: []string{"kernelMetric=x"}}, []string{"bgp.kernelMetric", "not an integer"}},
		{Settings{BGP: []string{"bgpEnabled=maybe"}}, []string{"bgp.bgpEnabled", "true or false"}},
		{Settings{Felix: []string{"routeRefreshInterval=5q"}}, []string{"felix", "routeRefreshInterval", "not a duration"}},
		{Settings{Felix: []string{"deviceRouteProtocol=300"}}, []string{"deviceRouteProtocol", "1..255"}},
		{Settings{Felix: []string{"deviceRouteProtocol"}}, []string{"KEY=VALUE"}},
	} {
		var f datastore.FelixConfiguration
		var b datastore.BGPConfiguration
		err := tc.s.Apply(&f, &b)
		if err == nil {
			t.Errorf("%+v: no error", tc.s)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not say %q", tc.s, err, w)
			}
		}
	}
	// Positive control: --allow-unknown writes an unknown value.
	var f datastore.FelixConfiguration
	var b datastore.BGPConfiguration
	if err := (Settings{Felix: []string{"programClusterRoutes=Bogus"}, AllowUnknown: true}).Apply(&f, &b); err != nil || f.ProgramClusterRoutes != "Bogus" {
		t.Errorf("allow unknown: %v %q", err, f.ProgramClusterRoutes)
	}
	if _, err := ParseQualified([]string{"programClusterRoutes=Enabled"}, false); err == nil || !strings.Contains(err.Error(), "felix.KEY=VALUE") {
		t.Errorf("unqualified key: %v", err)
	}
}
