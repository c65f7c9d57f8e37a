package bpf

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// The emulated tunnel (tunnel.c) passes helper flags that older kernels do
// not know: bpf_fib_lookup's BPF_FIB_LOOKUP_SKIP_NEIGH (Linux 6.3) and
// BPF_FIB_LOOKUP_SRC (6.7), bpf_skb_adjust_room's
// BPF_F_ADJ_ROOM_DECAP_L3_IPV4 (6.3). Flags are run-time arguments, so the
// verifier accepts the programs and they attach; the helpers then refuse
// every packet with EINVAL, and no flow is delivered (seen on Debian's
// 6.1). TunnelHelpersWork proves them instead: each helper is called once,
// by BPF_PROG_TEST_RUN, with one flag and arguments that fail a later check
// on a kernel that knows the flag; EINVAL means the flag is refused.

// tunnelFlag is one helper flag the tunnel needs, and the call that tests it.
type tunnelFlag struct {
	name  string // as in the uapi header, with the kernel that added it
	probe asm.Instructions
}

// fibLookupWith calls bpf_fib_lookup(ctx, zeroed params, 64, flags): with
// family 0, a kernel that knows every flag answers EAFNOSUPPORT.
func fibLookupWith(flags int32) asm.Instructions {
	insns := asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1), asm.Mov.Imm(asm.R0, 0)}
	for off := int16(-64); off < 0; off += 8 {
		insns = append(insns, asm.StoreMem(asm.RFP, off, asm.R0, asm.DWord))
	}
	return append(insns,
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -64),
		asm.Mov.Imm(asm.R3, 64),
		asm.Mov.Imm(asm.R4, flags),
		asm.FnFibLookup.Call(),
		asm.Return(),
	)
}

// errENOTSUPP is the kernel's internal ENOTSUPP (524), which BPF helpers
// return as such; golang.org/x/sys has no name for it.
const errENOTSUPP = unix.Errno(524)

// adjustRoomWith calls bpf_skb_adjust_room(ctx, 0, BPF_ADJ_ROOM_NET, flags)
// on a packet of no IP protocol: a kernel that knows the flag answers
// ENOTSUPP (errENOTSUPP; the protocol check comes after the flags').
func adjustRoomWith(flags int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Imm(asm.R3, 0), // BPF_ADJ_ROOM_NET; MAC is 1
		asm.Mov.Imm(asm.R4, flags),
		asm.FnSkbAdjustRoom.Call(),
		asm.Return(),
	}
}

var tunnelFlags = []tunnelFlag{
	{"bpf_fib_lookup BPF_FIB_LOOKUP_OUTPUT (Linux 4.18)", fibLookupWith(2)},
	{"bpf_fib_lookup BPF_FIB_LOOKUP_SKIP_NEIGH (Linux 6.3)", fibLookupWith(4)},
	{"bpf_fib_lookup BPF_FIB_LOOKUP_SRC (Linux 6.7)", fibLookupWith(16)},
	{"bpf_skb_adjust_room BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 (Linux 5.2)", adjustRoomWith(1 << 1)},
	{"bpf_skb_adjust_room BPF_F_ADJ_ROOM_DECAP_L3_IPV4 (Linux 6.3)", adjustRoomWith(1 << 7)},
}

// ErrTunnelHelpers is wrapped by TunnelHelpersWork when the kernel refuses
// a helper flag the tunnel passes.
var ErrTunnelHelpers = errors.New("the kernel refuses helper flags the eBPF tunnel needs")

// TunnelHelpersWork runs each helper call the tunnel depends on once and
// says which flags this kernel refuses (nil: none).
func TunnelHelpersWork() error {
	if err := memlockOnce(); err != nil {
		return fmt.Errorf("prove the tunnel's helpers: raise memlock rlimit for BPF: %w", err)
	}
	var refused []string
	for _, f := range tunnelFlags {
		errno, err := runProbe(f.probe)
		if err != nil {
			return fmt.Errorf("prove the tunnel's helpers: %s: %w", f.name, err)
		}
		if errno == unix.EINVAL {
			refused = append(refused, f.name)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: %s (EINVAL from BPF_PROG_TEST_RUN)", ErrTunnelHelpers, strings.Join(refused, "; "))
	}
	return nil
}

// runProbe loads insns as a tc program, runs it once on a zeroed 64-byte
// frame, and returns the helper's result as an errno (0 when it was not
// negative).
func runProbe(insns asm.Instructions) (unix.Errno, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, Instructions: insns, License: "Dual MIT/GPL"})
	if err != nil {
		return 0, fmt.Errorf("load: %w", err)
	}
	defer prog.Close()
	ret, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 64)})
	if err != nil {
		return 0, fmt.Errorf("test run: %w", err)
	}
	if r := int32(ret); r < 0 {
		return unix.Errno(-r), nil
	}
	return 0, nil
}
