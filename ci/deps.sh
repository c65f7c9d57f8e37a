#!/usr/bin/env bash
# Installs (Debian/Ubuntu, as root) or names what birdcage needs on this
# machine. Sourced by ci/demo and ci/test; safe to run again.
set -euo pipefail

# Debian packages: BIRD 2 and runc for the per-node BIRD containers,
# iproute2 for `birdcage exec`, QEMU + busybox + kmod + cpio/zstd/xz for the
# kernel VM runner that gives IPIP scenarios a kernel with ipip.
BIRDCAGE_DEBS=(bird2 runc iproute2 qemu-system-x86 busybox-static kmod cpio zstd xz-utils ca-certificates)

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
