#!/bin/bash
# upgrade for the hand-made lab, as deleting a calico-node pod and starting
# the new release's does: the old BIRD goes with SIGNAL (its routes stay:
# persist), the programmer is restarted on the new release, and the new
# BIRD starts with -R on the new release's config.
# Usage: upgrade.sh LABDIR NODE RELEASE SIGNAL
set -eu
lab=$1 node=$2 rel=$3 sig=$4
d=$lab/nodes/$node
pid=$(cat "$d/bird.pid")
kill -s "$sig" "$pid"
echo "$rel" >"$d/release"
bgp=$(sed -n 's/.*"programClusterRoutes":"\([^"]*\)".*/\1/p' "$lab/datastore/bgpconfiguration/default.json")
cp "$d/bird.$rel.${bgp:-unset}.conf" "$d/bird.conf"
kill -TERM "$(cat "$d/programmer.pid")"
# The control socket is free once the old BIRD is gone.
while [ -e "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; do sleep 0.01; done
echo "bird-start true" >"$d/ctl"
