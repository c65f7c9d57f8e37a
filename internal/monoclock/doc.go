// Package monoclock is the one clock every birdcage measurement uses:
// CLOCK_MONOTONIC in nanoseconds, the clock bpf_ktime_get_ns reads in the
// kernel. Probe send times, BPF arrival times, route timeline events and the
// harness's event marks are all taken from it, so they can be compared and
// subtracted directly.
//
// It must not be replaced by wall-clock time (time.Now().UnixNano jumps with
// NTP and is not what the kernel's BPF timestamps count).
package monoclock
