// Package topo owns the topology model — nodes, routers/ToRs, L2 switches,
// workloads, IP pools and blocks — its YAML form and Go API, its validation,
// and building and tearing it down in network namespaces: veths, bridges,
// tunl0, sysctls, addresses, and Calico-style workload veths (cali*).
//
// It must not know about BIRD, the route programmer or BPF: those run inside
// what this package builds. It never changes the host's root namespace;
// every veth is created directly inside the namespaces it joins.
package topo
