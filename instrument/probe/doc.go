// Package probe owns birdcage's probe traffic: UDP probes (a magic, a 64-bit
// sequence number and the send time, see bpf.PutProbe) sent at a fixed rate
// between chosen workload pairs, in each direction asked for, and the
// GapReport that says, per flow and in total, how many were sent, received
// and lost, the longest gap and when it started relative to a named event
// mark, and how many crossed each attached hop.
//
// Sockets are made inside each workload's network namespace on a locked
// thread (ns.Do) and keep that namespace for their life, so the send loop and
// the receivers run on ordinary threads and no thread ever sits in a foreign
// namespace for longer than a socket(2) call. One send loop serves every
// flow, sleeping with clock_nanosleep on CLOCK_MONOTONIC, so 1-10 kHz per
// flow costs one thread. No helper binary: nothing to build, ship or reap.
//
// What was received is measured by the BPF tracker (package bpf) at the
// destination workload's interface ingress, in the kernel, with the same
// clock as the send times and the route timeline; the receiving socket keeps
// a user-space count as a cross-check.
//
// It must not configure interfaces, addresses or routes, and must not know
// about topologies, BIRD or the programmer: callers name the endpoints.
package probe
