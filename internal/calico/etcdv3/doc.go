// Package etcdv3 is Calico's own datastore for the `calico` node flavour:
// an etcd member that real Felix and confd read (DATASTORE_TYPE=etcdv3,
// ETCD_ENDPOINTS), and a writer that keeps in it Calico's projectcalico.org/v3
// resources and IPAM keys, mapped from the same cluster model
// (internal/calico/datastore) the `model` flavour reads. Both flavours so
// read one truth, and a live change to the model (programClusterRoutes, a
// block moving) reaches etcd through Writer.Follow.
//
// What it owns:
//
//   - keys.go: Calico's key layout (/calico/resources/v3/projectcalico.org/…,
//     /calico/ipam/v2/…).
//   - resources.go: Map, the pure mapping from a datastore.Cluster to keys
//     and JSON, Calico's shapes written out by hand (Calico's Go packages
//     cannot be imported: no buildable module is served), each with the
//     Calico commit it was read at, and the per-release differences
//     (Options.Release).
//   - writer.go: Writer, which writes the mapping's difference through
//     go.etcd.io/etcd/client/v3 and owns only the keys it wrote.
//   - server.go: Start, one embedded etcd member listening on an address of
//     a network namespace, plus a unix socket for the harness.
//
// Why an embedded member (go.etcd.io/etcd/server/v3/embed) and not Debian's
// etcd-server run as a supervised process:
//
//   - CI and a new machine need nothing installed. Debian's package is
//     etcd 3.4.23, a series etcd no longer maintains and older than the
//     clients Calico 3.31–3.33 build with (etcd client 3.6.4, 3.6.5,
//     3.7.0 in their go.mod); the embedded member is 3.7.3.
//   - Lifecycle: the member lives and dies with the birdcage process that
//     runs the cluster, so no etcd process can be left behind by a crash;
//     its directory is <run dir>/etcd, registered with the run when made,
//     so `birdcage clean` finds it. The cost: a kept cluster (Keep) loses
//     its datastore when that process exits; Felix and BIRD keep the routes
//     they have, but nothing reaches them any more.
//   - Realism is the same where it matters: Calico's components speak etcd's
//     gRPC API over TCP from their node's namespace to an address on the
//     underlay, as to a control-plane host; they cannot tell an embedded
//     member from a standalone one.
//   - Weight: about fifty new modules in go.mod (gRPC, bbolt, raft,
//     zap, OpenTelemetry, Prometheus client) and some megabytes of binary;
//     the client alone would need most of them (gRPC, zap) anyway.
//
// The listeners are opened inside the namespace (StartEtcd opens them on
// the calling thread, run inside ns.WithNetNSPath); the HTTP gateway is off
// because it would dial the member from outside that namespace.
//
// Held against real Calico (BIRDCAGE_CALICO=DIR, an image-shaped
// directory; the tests skip for feature "calico" without one). Measured on
// a 3.33 build (v3.33.0-0.dev-1478-g6609dea54713, cgo) and the same held on
// a 3.32 build (release-v3.32 @ de60d98e97a7):
//
//   - Felix, reading only this etcd, routed another node's no-encap block
//     (via its BGP address, proto 80, onlink) within a second, and put the
//     Node's ipv4IPIPTunnelAddr on tunl0 and routed an IPIP block through it;
//     it routed a WorkloadEndpoint's address to its cali veth and rendered
//     the endpoint's profile.
//   - Felix takes a programClusterRoutes change by exiting ("change DOES
//     require Felix to restart", rc 129); only the restarted Felix acts on
//     it, so whatever runs Felix must restart it as runit does.
//   - confd rendered the mesh (peers at the Nodes' BGP addresses), the
//     node's own blocks from its affinity keys, and a kernel filter that
//     follows BGPConfiguration.programClusterRoutes.
//   - calico-node's tunnel-address allocator and startup leave what the
//     writer stored alone; startup adds only its own (the Node's interfaces
//     and status, calicoVersion, node.<name> FelixConfiguration,
//     IPAMConfiguration, tiers). Startup's IP must be the node's BGP
//     address from the model (autodetection could pick another NIC).
//
// It must not import harness/, topo/ or anything that knows about
// scenarios: where the member listens is the caller's choice, normally a
// control-plane host on the underlay (topo.Network.AddControlPlane), as
// TestDatastoreOnTheUnderlay does.
package etcdv3
