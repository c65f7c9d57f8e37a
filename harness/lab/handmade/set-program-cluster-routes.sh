#!/bin/bash
# setProgramClusterRoutes for the hand-made lab: writes both fields into the
# datastore (the programmers notice, exit 129 and are restarted by their
# agents), then does confd's part on every node after confd's latency:
# installs the config rendered for the new BGPConfiguration and reconfigures
# BIRD — inside the node's container (`runc exec`) in the runc flavour.
# Usage: set-program-cluster-routes.sh LABDIR FELIX BGP
set -eu
lab=$1 felix=$2 bgp=$3
ds=$lab/datastore
write() { # atomically, as the datastore's own writer does
	printf '%s\n' "$2" >"$(dirname "$1")/.tmp.$$" && mv "$(dirname "$1")/.tmp.$$" "$1"
}
# on NODEDIR CMD...: CMD on the node (in its container, if it has one).
on() {
	local n=$1
	shift
	if [ -s "$n/container" ]; then
		runc --root "$(cat "$lab/runc-root")" exec "$(cat "$n/container")" "$@"
	else
		"$@"
	fi
}
write "$ds/felixconfiguration/default.json" "{\"programClusterRoutes\":\"$felix\",\"routeRefreshInterval\":\"5s\"}"
write "$ds/bgpconfiguration/default.json" "{\"programClusterRoutes\":\"$bgp\"}"
for n in "$lab"/nodes/*/; do
	n=${n%/}
	(
		# The lab's confd reacts after its latency (a property of the lab,
		# modelled like the built-in target's; not a wait for anything).
		sleep "$(cat "$lab/confd-latency")"
		on "$n" sh -c 'cp "$1/bird.$(cat "$1/release").$2.conf" "$1/bird.conf" && birdc -s "$1/bird.ctl" configure >/dev/null' - "$n" "${bgp:-unset}"
	) &
done
wait
