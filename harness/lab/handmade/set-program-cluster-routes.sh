#!/bin/bash
# setProgramClusterRoutes for the hand-made lab: writes both fields into the
# datastore (the programmers notice, exit 129 and are restarted by their
# agents), then does confd's part on every node after confd's latency:
# installs the config rendered for the new BGPConfiguration and reconfigures
# BIRD. Usage: set-program-cluster-routes.sh LABDIR FELIX BGP
set -eu
lab=$1 felix=$2 bgp=$3
ds=$lab/datastore
write() { # atomically, as the datastore's own writer does
	printf '%s\n' "$2" >"$(dirname "$1")/.tmp.$$" && mv "$(dirname "$1")/.tmp.$$" "$1"
}
write "$ds/felixconfiguration/default.json" "{\"programClusterRoutes\":\"$felix\",\"routeRefreshInterval\":\"5s\"}"
write "$ds/bgpconfiguration/default.json" "{\"programClusterRoutes\":\"$bgp\"}"
for n in "$lab"/nodes/*/; do
	(
		# The lab's confd reacts after its latency (a property of the lab,
		# modelled like the built-in target's; not a wait for anything).
		sleep "$(cat "$lab/confd-latency")"
		cp "$n/bird.$(cat "$n/release").${bgp:-unset}.conf" "$n/bird.conf"
		birdc -s "$n/bird.ctl" configure >/dev/null
	) &
done
wait
