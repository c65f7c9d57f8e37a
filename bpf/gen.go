package bpf

// The objects are committed, so building needs no clang. Regenerate with
// `go generate ./bpf` (clang 14+ and libbpf headers). The include paths are
// where Debian/Ubuntu keep asm/types.h; a missing one is harmless.
//
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" -target bpfel,bpfeb counter counter.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" -target bpfel,bpfeb nltrace nltrace.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" -target bpfel,bpfeb tunnel tunnel.c
