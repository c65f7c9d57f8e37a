package timing

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/internal/env"
)

func TestFromEnv(t *testing.T) {
	vars := map[string]string{}
	load := func() (Model, error) {
		c, err := env.Load(env.Map(vars))
		if err != nil {
			return Model{}, err
		}
		return FromEnv(c)
	}
	m, err := load()
	if err != nil || m.Name != "realistic" || m.ProgrammerStartupDelay != RealisticProgrammerStartupDelay || !m.ConfdConcurrent {
		t.Fatalf("default: %v %v", m, err)
	}
	if m.BIRDScanTime != time.Duration(confd.DefaultTimers.ScanTime)*time.Second {
		t.Errorf("scan time %s is not the renderer's %ds", m.BIRDScanTime, confd.DefaultTimers.ScanTime)
	}
	vars[env.Timing] = "zero"
	vars[env.RestartDelay] = "250ms"
	vars[env.ConfdSerial] = "1"
	if m, err = load(); err != nil {
		t.Fatal(err)
	}
	if m.Name != "zero+env" || m.ProgrammerStartupDelay != 250*time.Millisecond || m.ConfdLatency != 0 || m.ConfdConcurrent {
		t.Errorf("zero + env: %v", m)
	}
	vars[env.BIRDScanTime] = "1500ms"
	if _, err := load(); err == nil {
		t.Error("a scan time BIRD cannot express (1.5 s) accepted")
	}
	vars[env.BIRDScanTime] = ""
	vars[env.Timing] = "fast"
	if _, err := load(); err == nil {
		t.Error("unknown model accepted")
	}
	vars[env.Timing] = ""
	vars[env.RestartDelay] = "-1s"
	if _, err := load(); err == nil {
		t.Error("negative delay accepted")
	}
}

func TestModelJSONRoundTrip(t *testing.T) {
	m := Realistic()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back Model
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back != m {
		t.Errorf("round trip: %s\n%+v\n%+v", b, back, m)
	}
}

func TestParseDelays(t *testing.T) {
	d, err := ParseDelays("0, 200ms,1s,3s")
	if err != nil || len(d) != 4 || d[0] != 0 || d[1] != 200*time.Millisecond || d[3] != 3*time.Second {
		t.Errorf("%v %v", d, err)
	}
	for _, bad := range []string{"", ",", "1x", "-2s"} {
		if _, err := ParseDelays(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
