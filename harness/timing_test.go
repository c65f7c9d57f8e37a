package harness

import (
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/dataplane/timing"
)

func TestResolveTiming(t *testing.T) {
	m := timing.Zero()
	m.BIRDScanTime = 0
	o := Options{Timing: &m}
	got, err := resolveTiming(&o)
	if err != nil || got.BIRDScanTime != 2*time.Second {
		t.Errorf("scan time unset: %v %v", got, err)
	}
	o = Options{Timing: &m, Timers: confd.Timers{ScanTime: 5}}
	if got, _ = resolveTiming(&o); got.BIRDScanTime != 5*time.Second {
		t.Errorf("the renderer's explicit scan time is not the model's: %v", got)
	}
	m.BIRDScanTime = 3 * time.Second
	o = Options{Timing: &m}
	if got, _ = resolveTiming(&o); o.Timers.ScanTime != 3 || got.BIRDScanTime != 3*time.Second {
		t.Errorf("the model's scan time is not rendered: timers %+v model %v", o.Timers, got)
	}
}
