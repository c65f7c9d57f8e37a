# shellcheck shell=bash
# Shared by ci/vm/prepare-kernel and ci/vm/run: where prepared kernels live and
# how a KERNEL= request becomes a Debian kernel release (uname -r of the guest).

# Debian packages the VM runner needs on the host, for CI's dependency step.
# (birdcage's own tests additionally need bird2 and runc, which the guest sees
# through the shared host root.)
BIRDCAGE_VM_DEBS="qemu-system-x86 busybox-static kmod cpio xz-utils zstd"

birdcage_vm_cache_root() {
	printf '%s\n' "${BIRDCAGE_KERNEL_CACHE:-/var/cache/birdcage/kernels}"
}

# birdcage_vm_initramfs_name GUEST_DIR: the initramfs file for this guest/init
# and busybox, named by a hash of both, so checkouts with different guest
# inits share one kernel cache without rebuilding each other's initramfs.
birdcage_vm_initramfs_name() {
	printf 'initramfs-%s.cpio\n' "$(cat "$1/init" /bin/busybox 2>/dev/null | sha256sum | cut -c1-16)"
}

vm_die() {
	printf '%s: %s\n' "${0##*/}" "$*" >&2
	exit 2
}

# birdcage_vm_cached_dir prints the prepared directory for $KERNEL without asking
# apt: an exact release, or the link prepare-kernel left for the empty/prefix
# request ("default", "alias-6.12"). Fails when nothing is prepared.
birdcage_vm_cached_dir() {
	local k=${KERNEL:-} cache c
	cache=$(birdcage_vm_cache_root)
	if [[ -z $k || $k == default ]]; then
		c=$cache/default
	elif [[ -f $cache/$k/ready ]]; then
		c=$cache/$k
	elif [[ -f $cache/$k-amd64/ready ]]; then
		c=$cache/$k-amd64
	else
		c=$cache/alias-$k
	fi
	[[ -f $c/ready ]] || return 1
	readlink -f "$c"
}

# birdcage_vm_apt_has NAME: apt knows a package named exactly NAME.
birdcage_vm_apt_has() {
	apt-cache pkgnames "$1" 2>/dev/null | grep -Fx -- "$1" >/dev/null
}

vm_need() { # vm_need CMD DEBIAN-PACKAGE
	command -v "$1" >/dev/null 2>&1 ||
		vm_die "$1 not found: apt-get install $2"
}

# birdcage_vm_release prints the kernel release for $KERNEL, asking apt only when
# the cache cannot answer. KERNEL may be empty (Debian's linux-image-amd64
# target), a full release (6.1.0-57-amd64, 6.12.117+deb12-amd64), a release
# without the flavour (6.1.0-57), or a prefix (6.12 = newest 6.12 apt can see).
birdcage_vm_release() {
	local k=${KERNEL:-} cache c cands
	cache=$(birdcage_vm_cache_root)
	if [[ -z $k || $k == default ]]; then
		vm_need apt-cache apt
		birdcage_vm_follow_meta linux-image-amd64 ||
			vm_die "apt cannot see linux-image-amd64 (run apt-get update, or set KERNEL=<release>)"
		return
	fi
	for c in "$k" "$k-amd64"; do
		if [[ -f $cache/$c/ready ]]; then
			printf '%s\n' "$c"
			return
		fi
	done
	vm_need apt-cache apt
	# Exact names only: apt reads a name with '.' or '+' that is not a package
	# as a regular expression (apt-get download linux-image-6.12 would fetch
	# every 6.12 image and debug package).
	for c in "$k" "$k-amd64"; do
		if birdcage_vm_apt_has "linux-image-$c"; then
			birdcage_vm_follow_meta "linux-image-$c" ||
				vm_die "KERNEL=$k: cannot follow linux-image-$c to a kernel image package"
			return
		fi
	done
	# A prefix (6.12, 6.1.0): the newest plain amd64 image whose release
	# continues the prefix at a boundary (6.1 must not pick 6.12.x).
	cands=$(apt-cache pkgnames "linux-image-$k" 2>/dev/null |
		grep -E '^linux-image-[0-9][^ ]*-amd64$' | grep -Ev -- '-(cloud|rt)-amd64$' |
		sed 's/^linux-image-//' | while read -r c; do
			[[ ${c#"$k"} == [.+-]* ]] && printf '%s\n' "$c"
		done | sort -V)
	if [[ -n $cands ]]; then
		c=$(printf '%s\n' "$cands" | tail -n1)
		birdcage_vm_follow_meta "linux-image-$c" ||
			vm_die "KERNEL=$k: cannot follow linux-image-$c to a kernel image package"
		return
	fi
	vm_die "KERNEL=$k: apt sees no package linux-image-$k or linux-image-$k-amd64 (apt-get update; for kernels from backports add bookworm-backports to the apt sources). Visible: $(apt-cache pkgnames linux-image-6 2>/dev/null | grep -E -- '-amd64$' | grep -Ev -- '-(cloud|rt)-amd64$' | sed 's/^linux-image-//' | sort -V | tr '\n' ' ')"
}

# birdcage_vm_follow_meta PKG: print the release of the kernel image PKG stands
# for, following metapackages (linux-image-amd64, linux-image-6.12-amd64) to the
# linux-image-<release> package they depend on.
birdcage_vm_follow_meta() {
	local pkg=$1 next i
	for i in 1 2 3 4; do
		birdcage_vm_apt_has "$pkg" || return 1
		next=$(apt-cache depends "$pkg" 2>/dev/null |
			sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1)
		if [[ -z $next ]]; then
			printf '%s\n' "${pkg#linux-image-}"
			return 0
		fi
		pkg=$next
	done
	return 1
}
