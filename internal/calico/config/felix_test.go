package config

import "testing"

// TestFelixSidePerRelease holds the Felix-side choices of each release as
// literals (release-v3.31 3cdeae8f7ace, release-v3.32 de60d98e97a7,
// release-v3.33 6609dea54713; docs/conformance-programmer.md).
func TestFelixSidePerRelease(t *testing.T) {
	for _, tc := range []struct {
		rel                                                  Release
		order                                                WriteOrder
		inFlight, mtuOverhead                                int
		claimsBIRD, protoAnywhere, noEncapNeedsNoIPIP, rsNoE bool
	}{
		{R331, DeleteFirst, 1, 20, false, true, true, false},
		{R332, DeleteFirst, 1, 20, false, true, true, false},
		{R333, DeleteFirst, 1, 20, true, true, false, true},
	} {
		r := tc.rel
		if r.ProgrammerWriteOrder() != tc.order || r.ProgrammerRequestsInFlight() != tc.inFlight ||
			r.IPIPRouteMTUOverhead() != tc.mtuOverhead || r.OwnsBIRDIPIPRoutes() != tc.claimsBIRD ||
			r.OwnsProtocolOnAnyDevice() != tc.protoAnywhere || r.NoEncapIPv4NeedsNoIPIP() != tc.noEncapNeedsNoIPIP ||
			r.RestartsOnNoEncapNeeded() != tc.rsNoE || !r.RestartsOnAnyFelixConfigChange() {
			t.Errorf("release %s: Felix-side choices differ from %+v", r, tc)
		}
	}
	for _, s := range []string{"delete-first", "replace-first"} {
		if o, ok := ParseWriteOrder(s); !ok || o.String() != s {
			t.Errorf("write order %q does not round-trip", s)
		}
	}
	if _, ok := ParseWriteOrder("sideways"); ok {
		t.Error("unknown write order accepted")
	}
}
