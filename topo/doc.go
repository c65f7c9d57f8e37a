// Package topo owns the topology model — nodes, routers/ToRs, L2 switches,
// workloads, IP pools and blocks — its YAML form and Go API, its validation,
// and building and tearing it down in network namespaces: veths, bridges,
// tunl0, sysctls, addresses, and Calico-style workload veths (cali*).
//
// It must not know about BIRD, the route programmer or the BPF counters:
// those run inside what this package builds. The one BPF it attaches is part
// of a device it builds: where the kernel has no ipip, tunl0 is a veth whose
// tunnel is bpf/tunnel.c (bpf.AttachTunnel; tunnel.go). It never changes the host's root namespace;
// every veth is created directly inside the namespaces it joins.
package topo
