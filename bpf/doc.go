// Package bpf owns birdcage's eBPF instruments: the C source of a TC program
// (counter.c), its bpf2go objects (committed, so building needs no clang), and
// the Go side that loads it, attaches it to one interface direction inside a
// network namespace, reads its maps back and detaches it.
//
// One attached Counter counts every IPv4/IPv6 packet per flow (source,
// destination, IP protocol; for IPIP also the inner flow) and tracks birdcage
// probes per flow: received, highest sequence, missing, late, duplicates,
// first/last arrival and the largest gap between consecutive arrivals, all in
// CLOCK_MONOTONIC nanoseconds (internal/monoclock). The probe wire format
// lives here too (PutProbe, ParseProbe), next to the C that parses it.
//
// Attach prefers TCX (kernel >= 6.6) and falls back to a clsact qdisc with a
// direct-action cls_bpf filter when TCX is not supported. The program always
// returns TC_ACT_UNSPEC (TCX_NEXT), so it never changes what happens to a
// packet and coexists with other TC programs.
//
// The second instrument is the netlink route trace (nltrace.c, RouteTracer):
// raw tracepoint programs on sys_enter/sys_exit that record the
// RTM_NEWROUTE/RTM_DELROUTE requests the processes of one network namespace
// send and the kernel's acks to them, so a test can tell what a process
// asked the kernel (and the errno it was refused with) from what the route
// table ended up holding. It is built on syscalls because this project's
// host kernel refuses fentry/fexit and LSM programs at load (EPERM, proved
// with a trivial program) and has no kprobes, while raw tracepoints and
// bpf_probe_read_user work; TraceRoutes returns a RouteTraceError (a
// testenv.FeatureError) where the kernel cannot.
//
// The third is not an instrument but a device: the emulated IPIP tunnel
// (tunnel.c, AttachTunnel) that topo puts on a node's tunl0 where the kernel
// has no ipip module — the encapsulation at the ingress of tunl0's veth
// peer, the decapsulation at the underlay's ingress, TTL/TOS/DF as the
// kernel's fallback tunnel. It runs after every counter on a hook (counters
// attach at the head of TCX; on clsact it takes a priority after theirs).
//
// It must not know about scenarios, topologies or what a flow means to the
// caller; it answers "what crossed this hook".
package bpf
