package pcap

// Stats is what a capture saw.
type Stats struct {
	Packets int64 `json:"packets"` // written to the file
	Bytes   int64 `json:"bytes"`   // the file's size
	// OverLimit counts kept packets not written because the file reached
	// MaxBytes.
	OverLimit int64 `json:"overLimit,omitempty"`
	// KernelDrops is what the socket's receive queue dropped
	// (PACKET_STATISTICS): packets the capture missed.
	KernelDrops int64 `json:"kernelDrops,omitempty"`
}
