package results

import "github.com/birdcage/birdcage/instrument/pcap"

// Event is something the harness did, on the same monotonic clock as the
// probes, the BPF counters and the route timeline.
type Event struct {
	Name string `json:"name"`
	Mono int64  `json:"mono"`
}

// CaptureFile is one interface's capture in a scenario's results: the
// probes that crossed a node's uplink (or tunl0) during the probe window.
type CaptureFile struct {
	Node  string `json:"node"`
	Iface string `json:"iface"`
	// Path is the pcap file, relative to the artifacts dir (the results
	// file's dir), so a report beside the results links it.
	Path string `json:"path"`
	pcap.Stats
}
