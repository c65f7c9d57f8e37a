// Package programmer is the route programmer daemon: a Felix-equivalent that
// runs once per node, inside the node's network namespace, reads the cluster
// datastore and keeps the node's cluster routes (and local workload routes)
// in the kernel. cmd/birdcage-programmer is its command line.
//
// It owns the loop (watch, calculate, reconcile, refresh, retry), the restart
// rule and the status file. It must not import harness/ or scenarios/, and it
// does not create or configure devices (topo/ owns tunl0, uplinks and
// workload veths).
//
// # Process contract
//
// birdcage starts one programmer per node and supervises it; users can point
// birdcage at their own programmer binary if it keeps this contract.
//
// Invocation: the process is started inside the node's network namespace
// (`ip netns exec <node-netns> <binary> ...`) and programs the main table of
// the namespace it starts in. Flags:
//
//	--node NAME          this node's name in the datastore (required)
//	--datastore DIR      the datastore directory (required): one JSON
//	                     document per file at DIR/<kind>/<name>.json, see
//	                     internal/calico/datastore; read-only for the programmer
//	--release R          pre-3.33 | 3.33 (default 3.33): the defaults and
//	                     behaviours of that release (internal/calico/config)
//	--status FILE        status file to write (optional), see below
//	--log-format F       json | text (default text), to stderr
//	--log-level L        debug | info | warn | error (default info)
//	--tunnel-device D    IPIP device name (default tunl0)
//	--noencap-multipath-via-gateways
//	                     NOT Felix's behaviour: program indirectly connected
//	                     no-encap destinations multipath over every uplink
//	                     gateway (to evaluate a candidate dual-ToR fix)
//	--startup-delay D    restart profile, fixed part (Go duration; default
//	                     $BIRDCAGE_PROGRAMMER_STARTUP_DELAY, else 0)
//	--resync-delay-per-route D
//	                     restart profile, per desired route (default
//	                     $BIRDCAGE_PROGRAMMER_RESYNC_DELAY_PER_ROUTE, else 0)
//	--write-order O      emulation knob: delete-first | replace-first
//	                     (default $BIRDCAGE_PROGRAMMER_WRITE_ORDER, else the
//	                     release's: delete-first, as Felix in 3.31-3.33)
//	--delete-names-protocol
//	                     emulation knob: deletes name the route's protocol
//	                     instead of Felix's wildcard 0 (default on when
//	                     $BIRDCAGE_PROGRAMMER_DELETE_NAMES_PROTOCOL=1)
//	--write-window N     emulation knob: route requests in flight at once;
//	                     0 = the release's (1: each request waited for, as
//	                     Felix); e.g. 256 pipelines a pass (default
//	                     $BIRDCAGE_PROGRAMMER_WRITE_WINDOW, else 0)
//	--no-tunnel-mtu      emulation knob: no MTU on IPIP routes (Felix writes
//	                     the host MTU - 20, the host MTU being the smallest
//	                     of the node's uplinks)
//
// Emulation knobs: by default a release profile does what that release's
// Felix does (docs/conformance-programmer.md); each knob turns one choice
// away from it so a scenario can show what the choice changes. The status
// file records the choices in force (writeOrder, deleteNamesProtocol,
// tunnelMTU, writeWindow).
//
// Restart profile: a real Felix spends time between its process start and
// its first dataplane write (config load, datastore connection, a full
// resync until it is in sync); this programmer reads a local directory and
// would otherwise program within milliseconds. With a profile, the first
// programming pass does not begin before startup-delay + resync-delay-per-
// route × (desired routes) has passed since the process started (read at
// package initialisation); datastore reads and route computation happen
// meanwhile and count towards it. During the delay the status file says
// state "starting" and nothing is written to the kernel; SIGTERM still stops
// the process at once. Zero (the default) is the fastest possible restart.
// A supervisor that wants a profile sets the environment variables, which a
// binary without the flags ignores; such a binary's restart time is its own.
//
// Datastore: the programmer reads FelixConfiguration (programClusterRoutes,
// deviceRouteProtocol, routeRefreshInterval), IP pools, nodes, block
// affinities and workloads. It re-reads on every change (inotify plus a
// periodic re-read). An invalid datastore is logged and counted as a sync
// error; the last good state stays programmed.
//
// Restart rule: like Felix, the programmer exits when a field it only reads
// at start changes, so that its supervisor restarts it: the effective
// programClusterRoutes value (after release defaulting), the effective
// deviceRouteProtocol, the effective routeRefreshInterval (Felix restarts
// on any FelixConfiguration change, in 3.31-3.33), and the pool
// encapsulation summary (whether any IPIP pool exists; in 3.33, whether
// no-encap pools exist that the programmer owns). Everything else — blocks,
// nodes, workloads, uplinks — is applied live (and routeRefreshInterval too
// in a profile that is not a Calico release).
//
// Exit codes:
//
//	0    SIGTERM or SIGINT: clean stop; routes are left in the kernel
//	1    fatal error (cannot open the datastore, netlink, status file)
//	2    bad flags
//	129  ExitConfigChanged: a restart-relevant config field changed;
//	     restart me (the routes stay in place meanwhile)
//
// Status file: JSON (Status), rewritten atomically (temp file + rename in
// the same directory) after every sync pass and state change: node,
// release, pid, state (starting | running | config-changed | stopped),
// effective ownership, protocol, last sync time in Unix ns and in
// CLOCK_MONOTONIC ns (comparable across processes on the host); the process
// start, the restart profile's delay and the start of the first programming
// pass (startedMonotonicNano, startupDelayNano, firstProgramMonotonicNano;
// ns); desired and owned route counts, and the cumulative count and last
// text of sync errors.
//
// Logs: structured slog lines; every route added, replaced or deleted is one
// line with the destination, the route, its class and why.
package programmer
