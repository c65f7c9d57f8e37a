package monoclock

import "testing"

// Now must agree with clock_gettime(CLOCK_MONOTONIC), the clock BPF's
// bpf_ktime_get_ns reads, or probe timestamps and BPF arrival times drift
// apart.
func TestNowMatchesClockGettime(t *testing.T) {
	for range 100 {
		a := Now()
		k, err := Syscall()
		if err != nil {
			t.Fatal(err)
		}
		b := Now()
		if k < a-20_000 || k > b+20_000 {
			t.Fatalf("clock_gettime(CLOCK_MONOTONIC)=%d is outside [%d, %d] ± 20µs", k, a, b)
		}
	}
}

func TestNowIsMonotonic(t *testing.T) {
	prev := Now()
	for range 10000 {
		n := Now()
		if n < prev {
			t.Fatalf("Now went backwards: %d after %d", n, prev)
		}
		prev = n
	}
}
