package monoclock

import (
	"time"

	"golang.org/x/sys/unix"
)

// Go's monotonic clock reading (runtime nanotime) is CLOCK_MONOTONIC on
// Linux, so the offset between a time.Time's monotonic reading and
// CLOCK_MONOTONIC is a constant. We read both once and afterwards derive
// Now from time.Since, which goes through the vDSO instead of a syscall.
var (
	baseTime time.Time
	baseNs   int64
)

func init() {
	// Bracket the syscall with two Go readings and take the midpoint, so
	// the constant offset is off by at most half the bracket. A bracket
	// that caught a preemption would be off by far more, so keep the
	// tightest of several tries (~100 ns on an idle or a loaded machine).
	best := time.Duration(1<<63 - 1)
	for range 32 {
		var ts unix.Timespec
		t0 := time.Now()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			panic("monoclock: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
		}
		t1 := time.Now()
		if d := t1.Sub(t0); d < best {
			best = d
			baseTime = t0.Add(d / 2)
			baseNs = ts.Nano()
		}
	}
}

// Now returns CLOCK_MONOTONIC in nanoseconds.
func Now() int64 { return baseNs + int64(time.Since(baseTime)) }

// Syscall returns CLOCK_MONOTONIC read with clock_gettime(2) directly. It is
// slower than Now and exists to check Now against the kernel.
func Syscall() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, err
	}
	return ts.Nano(), nil
}

// Since returns the time elapsed since a monotonic timestamp.
func Since(ns int64) time.Duration { return time.Duration(Now() - ns) }

// Ms converts nanoseconds — a monotonic difference or a time.Duration — to
// milliseconds, for reports. It is the project's one such conversion.
func Ms[T ~int64](ns T) float64 { return float64(ns) / 1e6 }
