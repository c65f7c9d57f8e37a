#!/bin/bash
# Node agent of the hand-made lab: the calico-node container's role. It runs
# inside the node's network namespace (under `ip netns exec`, or as a runc
# container's init), keeps the route programmer running (restarting it
# whenever it exits, as a pod's restart policy does: exit 129 is the
# programmer asking for a restart after a config change), and starts BIRD
# when told on its control FIFO. Commands, one per line:
#   bird-start [true|false]   start BIRD (true: with -R, graceful-restart recovery)
#   stop                      stop BIRD and the programmer, then exit
# SIGTERM (`runc kill`, `docker stop`) is a stop too.
# Files in the node's directory $1: release, bird.conf, ctl (FIFO),
# bird.pid, programmer.pid, status.json, programmer.log, bird.log.
set -u
d=$1 node=$2 ds=$3 prog=$4

programmer_loop() {
	while [ ! -e "$d/stopping" ]; do
		"$prog" --node "$node" --datastore "$ds" --release "$(cat "$d/release")" \
			--status "$d/status.json" --log-format json 2>>"$d/programmer.log" &
		echo $! >"$d/programmer.pid"
		wait $!
	done
}

bird_start() {
	local args=(-f -c "$d/bird.conf" -s "$d/bird.ctl" -P "$d/bird.pid")
	[ "${1:-false}" = true ] && args+=(-R)
	rm -f "$d/bird.pid"
	bird "${args[@]}" 2>>"$d/bird.log" &
	bird_pid=$!
}

programmer_loop &
loop_pid=$!
bird_start false
echo ready >"$d/agent.ready"
# Opened read-write: the open never waits for a writer. The read goes on
# through a signal, so SIGTERM's trap says "stop" down the FIFO itself.
exec 3<>"$d/ctl"
trap 'echo stop >&3' TERM
while :; do
	read -r cmd arg <&3 || continue
	case $cmd in
	bird-start) bird_start "$arg" ;;
	stop) break ;;
	*) echo "agent $node: unknown command $cmd" >&2 ;;
	esac
done
touch "$d/stopping"
[ -n "${bird_pid:-}" ] && kill -TERM "$bird_pid" 2>/dev/null
[ -s "$d/programmer.pid" ] && kill -TERM "$(cat "$d/programmer.pid")" 2>/dev/null
wait
