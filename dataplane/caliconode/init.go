package caliconode

// initScript is the container's first process: birdcage's stand-in for the
// image's start_runit and runit (node/filesystem/sbin/start_runit,
// etc/rc.local, etc/service/available/*/run at the commits in doc.go).
// It starts the services rc.local enables for the BIRD backend — felix,
// bird, bird6, confd — each as its run script does (`exec 2>&1`, the same
// argv and environment), each restarted when it exits, at most once a
// second, as runsv restarts a service. What it leaves out: the startup step (`calico-node
// -startup`: birdcage's etcd writer has written the Node, the pools and
// the tunnel address that step would), allocate-tunnel-addrs, and
// node-services (status reporting). SIGTERM stops the services with
// SIGTERM, as runsvdir does, and waits for them; SIGKILL of this process
// kills every process of the container (it is the PID namespace's init).
//
// The services' argv come in as CALICO_FELIX and CALICO_CONFD (the
// release's binary and subcommand); every service appends its stdout and
// stderr to /var/log/calico/<service>.log and records its pid in
// /run/sv/<service>.pid, which `sv hup` (svScript) reads.
const initScript = `#!/bin/sh
mkdir -p /run/sv
# calico-node's startup writes the node's name here; rc.local and BIRD's
# readiness check read it.
printf '%s' "$NODENAME" > /var/lib/calico/nodename
loops=""
service() {
	name=$1
	shift
	(
		while :; do
			echo "birdcage-runit: starting $name: $*" >>/var/log/calico/$name.log
			start=$(date +%s%N)
			"$@" >>/var/log/calico/$name.log 2>&1 &
			echo $! >/run/sv/$name.pid
			wait $!
			echo "birdcage-runit: $name exited with status $?" >>/var/log/calico/$name.log
			# runsv starts a service at most once a second: a service
			# that ran a second or more restarts at once.
			ran=$(( $(date +%s%N) - start ))
			if [ "$ran" -lt 1000000000 ]; then sleep "0.$(printf %09d $(( 1000000000 - ran )))"; fi
		done
	) &
	loops="$loops $!"
}
stop() {
	kill -TERM $loops 2>/dev/null
	for f in /run/sv/*.pid; do kill -TERM "$(cat "$f")" 2>/dev/null; done
	for f in /run/sv/*.pid; do
		p=$(cat "$f")
		while kill -0 "$p" 2>/dev/null; do sleep 0.02; done
	done
	exit 0
}
trap stop TERM INT
# felix/run: FELIX_FELIXHOSTNAME, FELIX_ETCDENDPOINTS, FELIX_DATASTORETYPE
# from the node's environment.
service felix env FELIX_FELIXHOSTNAME="$NODENAME" FELIX_ETCDENDPOINTS="$ETCD_ENDPOINTS" FELIX_DATASTORETYPE="$DATASTORE_TYPE" $CALICO_FELIX
service bird bird -R -s /var/run/calico/bird.ctl -d -c /etc/calico/confd/config/bird.cfg
service bird6 bird6 -R -s /var/run/calico/bird6.ctl -d -c /etc/calico/confd/config/bird6.cfg
service confd $CALICO_CONFD
echo "birdcage-runit: services started:$loops"
while :; do wait; sleep 1; done
`

// svScript is runit's sv as far as confd uses it: conf.d/bird.toml's
// reload_cmd is "sv hup bird || true", so without an sv BIRD never
// reloads a changed config.
const svScript = `#!/bin/sh
case "$1" in
hup|h) exec kill -HUP "$(cat /run/sv/$(basename "$2").pid)" ;;
*) echo "birdcage's sv: only 'sv hup SERVICE' (confd's reload_cmd) is provided, not: $*" >&2; exit 1 ;;
esac
`
