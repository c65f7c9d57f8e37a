// Package vm holds the kernel VM runner's self-test. The runner itself is the
// shell scripts next to this file: prepare-kernel fetches and prepares a Debian
// kernel, run boots it in QEMU and runs one command in it (usable as
// `go test -exec`). See README.md.
//
// The package owns nothing the harness or scenarios import; it must not hold
// scenario logic.
package vm
