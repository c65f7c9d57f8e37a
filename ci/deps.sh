#!/usr/bin/env bash
# Installs (Debian/Ubuntu, as root) or names what birdcage needs on this
# machine. Sourced by ci/demo and ci/test; safe to run again.
set -euo pipefail

# Debian packages: BIRD 2 and runc for the per-node BIRD containers,
# iproute2 for `birdcage exec`, and what the kernel VM runner that gives
# IPIP scenarios a kernel with ipip needs (BIRDCAGE_VM_DEBS, ci/vm/lib.sh).
# shellcheck source=vm/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/vm/lib.sh"
# shellcheck disable=SC2206 # a word list by design
# chromium: the HTML report's test opens the report headless and checks the
# console (and saves a screenshot). nftables: the collision spec stages BGP
# message order with an nftables table in a node's namespace.
BIRDCAGE_DEBS=(bird2 runc iproute2 procps util-linux ca-certificates chromium nftables $BIRDCAGE_VM_DEBS)

birdcage_need_go() {
	if ! command -v go >/dev/null 2>&1; then
		for d in /usr/local/go/bin /usr/lib/go/bin; do
			[ -x "$d/go" ] && export PATH="$d:$PATH" && break
		done
	fi
	if ! command -v go >/dev/null 2>&1; then
		echo "birdcage: Go 1.25 or newer is missing. Install it (Debian/Ubuntu: apt-get install golang-go from backports, or the go.dev tarball into /usr/local/go) and run again." >&2
		return 1
	fi
	local v
	v=$(go env GOVERSION | sed 's/^go//')
	case "$v" in
	1.2[5-9]* | 1.[3-9]* | [2-9].*) ;;
	*) echo "birdcage: Go $v is too old; birdcage needs Go 1.25 or newer (cilium/ebpf needs it)." >&2; return 1 ;;
	esac
}

birdcage_install_debs() {
	if [ "$(id -u)" != 0 ]; then
		echo "birdcage: needs root (network namespaces, netlink, runc): run with sudo" >&2
		return 1
	fi
	local missing=()
	for p in "${BIRDCAGE_DEBS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		if ! command -v apt-get >/dev/null 2>&1; then
			echo "birdcage: missing packages ${missing[*]}, and this is not a Debian/Ubuntu machine: install their equivalents (bird 2.x, runc, iproute2, qemu-system-x86_64, a static busybox, kmod, cpio, zstd, xz)." >&2
			return 1
		fi
		echo "birdcage: installing ${missing[*]}" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
	# Other BIRD releases (1.6, 2.17, 3.1) as container root filesystems from
	# Debian's packages, cached; without them the per-release tests skip,
	# naming the release.
	if [ -x ci/bird-releases ] && ! ci/bird-releases >/dev/null; then
		echo "birdcage: ci/bird-releases could not prepare every BIRD release; the per-release tests will skip, naming it" >&2
	fi
	# The bird2 package may start a BIRD in the host's own namespace on
	# machines with systemd; birdcage never wants that one.
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet bird 2>/dev/null; then
		echo "birdcage: stopping and disabling the host's bird.service that the bird2 package started" >&2
		systemctl disable --now bird >/dev/null 2>&1 || true
	fi
}

# The kernel VM runner fetches a Debian kernel package with apt-get download,
# which needs apt's package lists even where every package above was already
# installed (a fresh image often ships with empty lists).
birdcage_apt_lists_for_kernel() {
	if command -v apt-cache >/dev/null 2>&1 && ! apt-cache show linux-image-amd64 >/dev/null 2>&1; then
		echo "birdcage: apt cannot see linux-image-amd64 yet: apt-get update" >&2
		apt-get update -qq
	fi
}

# birdcage_vm_setup: prepare the VM kernel and settle what depends on the
# accelerator the VM will really use (ci/vm/run --accel probes KVM by booting
# a guest, once per host kernel + QEMU + guest kernel): under software
# emulation (TCG) 12 flows at 1 kHz starve the guest's CPUs — most probes
# lost even on a converged cluster; 200 Hz loses none — and everything takes
# 2-4x longer. Exports BIRDCAGE_VM_ACCEL_USED, BIRDCAGE_PROBE_RATE and
# BIRDCAGE_TIMEOUT_SCALE (unless set),
# BIRDCAGE_VM_TIMEOUT and BIRDCAGE_GO_TIMEOUT (go test -timeout, a little
# shorter so a hung test's goroutine dump comes before the VM is killed).
birdcage_vm_setup() {
	birdcage_apt_lists_for_kernel
	ci/vm/prepare-kernel >/dev/null
	BIRDCAGE_VM_ACCEL_USED=$(ci/vm/run --accel) || return 1
	export BIRDCAGE_VM_ACCEL_USED
	if [ "$BIRDCAGE_VM_ACCEL_USED" = tcg ]; then
		export BIRDCAGE_PROBE_RATE="${BIRDCAGE_PROBE_RATE:-200}"
		# Waiting limits only: a claim that holds holds sooner, one that does
		# not still fails (scenarios/scenariotest/suite.go, BIRDCAGE_TIMEOUT_SCALE).
		export BIRDCAGE_TIMEOUT_SCALE="${BIRDCAGE_TIMEOUT_SCALE:-2}"
		export BIRDCAGE_VM_TIMEOUT="${BIRDCAGE_VM_TIMEOUT:-45m}" BIRDCAGE_GO_TIMEOUT=40m
	else
		export BIRDCAGE_VM_TIMEOUT="${BIRDCAGE_VM_TIMEOUT:-25m}" BIRDCAGE_GO_TIMEOUT=20m
	fi
	echo "vm: accelerator $BIRDCAGE_VM_ACCEL_USED; probe rate ${BIRDCAGE_PROBE_RATE:-1000 (default)} Hz per flow; scenario waits x${BIRDCAGE_TIMEOUT_SCALE:-1}; VM timeout $BIRDCAGE_VM_TIMEOUT"
}
