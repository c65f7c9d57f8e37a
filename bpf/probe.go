package bpf

import "encoding/binary"

// The probe payload, right after the UDP header, big endian. counter.c parses
// the same layout; change both together.
const (
	// ProbeMagic starts every probe payload ("bcB1").
	ProbeMagic uint32 = 0x62634231
	// ProbeLen is the length of a probe payload in bytes.
	ProbeLen = 24
)

// PutProbe writes a probe payload for seq (>= 1) sent at sentNs (monotonic
// nanoseconds) into b, which must be at least ProbeLen bytes.
func PutProbe(b []byte, seq uint64, sentNs int64) {
	_ = b[ProbeLen-1]
	binary.BigEndian.PutUint32(b[0:], ProbeMagic)
	binary.BigEndian.PutUint32(b[4:], 0)
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint64(b[16:], uint64(sentNs))
}

// ParseProbe reads a probe payload; ok is false if b is not one.
func ParseProbe(b []byte) (seq uint64, sentNs int64, ok bool) {
	if len(b) < ProbeLen || binary.BigEndian.Uint32(b) != ProbeMagic {
		return 0, 0, false
	}
	seq = binary.BigEndian.Uint64(b[8:])
	if seq == 0 {
		return 0, 0, false
	}
	return seq, int64(binary.BigEndian.Uint64(b[16:])), true
}
