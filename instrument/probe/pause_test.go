package probe

import "testing"

// The sender's pause record says how much of a receiver-side gap the
// sender itself accounts for.
func TestSenderPauseWithin(t *testing.T) {
	sd := &sender{}
	sd.recordPause(pause{from: 100, to: 140}) // 40 before the gap, partly inside
	sd.recordPause(pause{from: 500, to: 520}) // 20, wholly inside
	sd.recordPause(pause{from: 900, to: 990}) // 90, after the gap
	for _, tc := range []struct {
		from, to, want int64
	}{
		{120, 600, 20}, // the first overlaps by 20, the second is 20
		{130, 600, 20},
		{100, 600, 40},
		{600, 800, 0}, // the sender was sending throughout
		{0, 1000, 90},
	} {
		if got := sd.pauseWithin(tc.from, tc.to); got != tc.want {
			t.Errorf("pauseWithin(%d, %d) = %d, want %d", tc.from, tc.to, got, tc.want)
		}
	}
}

func TestSenderPauseRecordKeepsTheLongest(t *testing.T) {
	sd := &sender{}
	for i := range int64(maxPauses) {
		sd.recordPause(pause{from: i * 10, to: i*10 + 3})
	}
	sd.recordPause(pause{from: 1 << 40, to: 1<<40 + 500})
	sd.recordPause(pause{from: 1 << 41, to: 1<<41 + 1}) // shorter than all: dropped
	if len(sd.pauses) != maxPauses {
		t.Fatalf("record grew to %d", len(sd.pauses))
	}
	if got := sd.pauseWithin(0, 1<<42); got != 500 {
		t.Errorf("longest pause %d, want 500 (the long pause must replace a short one)", got)
	}
}
