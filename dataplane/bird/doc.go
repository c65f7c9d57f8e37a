// Package bird runs upstream BIRD — the host's Debian bird2 by default, or a
// release (1.6, 2.0, 2.17, 3.1) from the root filesystem ci/bird-releases
// unpacked (FindRelease) — one instance per node and per BGP-speaking router
// (on 1.x a node's instance drives bird and bird6 together), each in its
// own container joined to that node's network namespace, and talks to it
// over its control socket.
//
// It owns the container lifecycle (start, start with -R, SIGTERM, SIGKILL,
// reconfigure, removal), the OCI runtime behind the Runtime interface (runc
// by default; Docker or containerd can serve labs), and a birdc client that
// parses `show protocols` and `show route` into Go values.
//
// Every container id carries the run prefix and every dir lives in the run
// dir; both are registered with the run's cleanup when created. It must not
// render configs (dataplane/confd does), build topologies, or know scenarios.
package bird
