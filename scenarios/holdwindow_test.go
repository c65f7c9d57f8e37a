package scenarios_test

import (
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/confd"
)

// The hold-timer window of the slow dual-ToR spec, in both forms: its ends
// follow from the timers, it admits the fallbacks measured before the
// window existed (full form: 220–228 s) and it rejects a link-state
// fallback (~1 s), so it tells the two ways of noticing apart.
func TestHoldWindow(t *testing.T) {
	scan := 2 * time.Second
	for _, tc := range []struct {
		name      string
		timers    confd.Timers
		low, high time.Duration // unscaled
		admit     []time.Duration
	}{
		{"reduced", reducedHoldTimers, 2750 * time.Millisecond, 15 * time.Second, []time.Duration{3750 * time.Millisecond, 9 * time.Second}},
		{"full", confd.Timers{}, 99 * time.Second, 246 * time.Second, []time.Duration{220 * time.Second, 228 * time.Second}},
	} {
		w := newHoldWindow(tc.timers, scan)
		if w.low != tc.low || w.high != machine.Wait(tc.high) {
			t.Errorf("%s: window %v..%v, want %v..%v", tc.name, w.low, w.high, tc.low, machine.Wait(tc.high))
		}
		for _, d := range tc.admit {
			if !w.contains(float64(d) / 1e6) {
				t.Errorf("%s: %v is a hold-timer fallback the window rejects (%s)", tc.name, d, w)
			}
		}
		if w.contains(1000) {
			t.Errorf("%s: a link-state fallback at 1 s is inside the window (%s)", tc.name, w)
		}
	}
}
