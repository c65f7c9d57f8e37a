// Package caliconode runs the `calico` node flavour: one node's calico/node
// pod — Calico's own Felix, confd and BIRD (the projectcalico BIRD 1.6.8
// fork) — from a directory laid out like the calico/node image's root
// filesystem (an exported image, or a build laid out the same way).
//
// The pod is a runc container sharing the node's network namespace. Its
// root is an overlay: birdcage's shim (the init and sv below) over the
// source directory, which is never written; the pod's writes (the
// rendered bird.cfg under /etc/calico/confd/config) land in an upper
// directory of that start's, so every start sees the image's own
// /etc/calico, as a new pod does. /var/run/calico (BIRD's control
// sockets, reachable from the host for birdc), /var/lib/calico and
// /var/log/calico are bound from the node's directories in the run dir,
// as the manifest's hostPath volumes outlive a pod. A source with no
// userland of its own (a build: Calico's binaries and files only) gets the
// host's shell, iptables, ipset and libraries bound read-only at
// /usr/local and /usr/lib, after the image's directories on PATH.
//
// How calico/node starts its processes, read at projectcalico/calico
// release-v3.33 6609dea54713, release-v3.32 de60d98e97a7 and
// release-v3.31 3cdeae8f7ace (node/filesystem/sbin/start_runit,
// etc/rc.local, etc/service/available/*/run, node/Dockerfile):
// start_runit runs rc.local (the startup step, then it enables felix,
// bird, bird6 and confd for the BIRD backend) and runit's runsvdir. The
// run scripts: `bird -R -s /var/run/calico/bird.ctl -d -c
// /etc/calico/confd/config/bird.cfg` (bird6 likewise), felix as
// `calico component felix` (3.33, /usr/bin/calico) or `calico-node
// -felix` (3.31, 3.32, /bin/calico-node) with FELIX_FELIXHOSTNAME,
// FELIX_ETCDENDPOINTS and FELIX_DATASTORETYPE taken from NODENAME,
// ETCD_ENDPOINTS and DATASTORE_TYPE, confd as `calico component confd` /
// `calico-node -confd`; confd reloads BIRD with `sv hup bird`
// (conf.d/bird.toml reload_cmd). The init here (init.go) starts those
// four services with those argv and restarts each as runsv does; it does
// not run the startup step (birdcage's etcd writer has written what it
// would: the Node, its tunnel address, the pools and ClusterInformation)
// nor node-services (status reporting).
package caliconode
