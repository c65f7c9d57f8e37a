package judge

import "testing"

func TestOwnerIsASetOfWriters(t *testing.T) {
	for _, c := range []struct {
		programmer, bird bool
		want             Owner
		name             string
	}{
		{false, false, Nobody, "nobody"},
		{true, false, ByProgrammer, "the programmer"},
		{false, true, ByBIRD, "BIRD"},
		{true, true, Both, "both"},
	} {
		got := OwnerOf(c.programmer, c.bird)
		if got != c.want || got.String() != c.name {
			t.Errorf("OwnerOf(%v, %v) = %v (%q), want %v (%q)", c.programmer, c.bird, uint8(got), got, uint8(c.want), c.name)
		}
	}
	if !Both.Has(ByBIRD) || !Both.Has(ByProgrammer) || !Both.Has(Both) {
		t.Error("both should hold each writer")
	}
	// Control: a single owner holds neither the other nor the empty set.
	if ByBIRD.Has(ByProgrammer) || ByBIRD.Has(Both) || ByBIRD.Has(Nobody) || Nobody.Has(Nobody) {
		t.Error("a single owner must not hold the other writer, both, or nobody")
	}
}
