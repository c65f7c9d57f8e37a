package programmer

import (
	"slices"
	"testing"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/env"
)

// TestKnobs: the zero knobs are the release's own choices; each knob turns
// exactly one, and reaches the command as one environment variable.
func TestKnobs(t *testing.T) {
	o, err := tableOptions(config.R333, Knobs{}, 1500)
	if err != nil || o.WriteOrder != config.DeleteFirst || o.DeleteNamesProtocol || o.TunnelMTU != 1480 || o.WriteWindow != 1 || o.IPv4Metric != 0 {
		t.Errorf("3.33 without knobs: %+v %v; want delete-first, wildcard deletes, MTU 1480, one request at a time, IPv4 at metric 0", o, err)
	}
	if vars := (Knobs{}).Env(); len(vars) != 0 {
		t.Errorf("zero knobs set %q", vars)
	}
	k := Knobs{WriteOrder: "replace-first", DeleteNamesProtocol: true, NoTunnelMTU: true, WriteWindow: 256, IPv4Metric: 1024}
	o, err = tableOptions(config.R333, k, 1500)
	if err != nil || o.WriteOrder != config.ReplaceFirst || !o.DeleteNamesProtocol || o.TunnelMTU != 0 || o.WriteWindow != 256 || o.IPv4Metric != 1024 {
		t.Errorf("3.33 with every knob: %+v %v", o, err)
	}
	want := []string{env.Set(env.ProgrammerWriteOrder, "replace-first"), env.Set(env.ProgrammerDeleteNamesProtocol, "1"), env.Set(env.ProgrammerNoTunnelMTU, "1"), env.Set(env.ProgrammerWriteWindow, "256"), env.Set(env.ProgrammerIPv4Metric, "1024")}
	if vars := k.Env(); !slices.Equal(vars, want) {
		t.Errorf("env %q, want %q", vars, want)
	}
	if _, err := tableOptions(config.R333, Knobs{WriteOrder: "sideways"}, 1500); err == nil {
		t.Error("an unknown write order was accepted")
	}
	if _, err := tableOptions(config.R333, Knobs{IPv4Metric: -1}, 1500); err == nil {
		t.Error("a negative IPv4 metric was accepted")
	}
}
