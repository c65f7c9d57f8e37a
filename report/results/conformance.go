package results

import "net/netip"

// Conformance names the case of the model-vs-real table a row measures
// (docs/conformance.md, `birdcage conformance`): a spec that runs on both
// flavours records the same Case on each, so a model run's row and a real
// Calico run's row pair by it, whatever their specs are called.
type Conformance struct {
	// Case is the case's name, the same on both flavours ("upgrade
	// 3.32 → 3.33, no-encap, SIGKILL").
	Case string `json:"case"`
	// Node is the node whose kernel routes and route requests the case
	// reads (the upgraded node, the node a change is watched on).
	Node string `json:"node"`
	// From and To bound the case's action (CLOCK_MONOTONIC ns, the route
	// events' clock): the routes before and after, and the requests
	// between, are read there.
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// KernelRequest is one route request a process sent the kernel on a node,
// as the netlink route trace recorded it (bpf.RouteRequest, in plain data
// so that the results file needs no BPF to read).
type KernelRequest struct {
	At  int64        `json:"at"`
	Op  string       `json:"op"` // "add" or "del"
	Dst netip.Prefix `json:"dst"`
	// Protocol is rtm_protocol (0 on a delete: any protocol).
	Protocol int `json:"protocol"`
	Metric   int `json:"metric,omitempty"`
	// HasMetric: the request carried RTA_PRIORITY (a delete without it
	// matches any metric).
	HasMetric bool `json:"hasMetric,omitempty"`
	// Flags are the netlink header's NLM_F_* flags (create, excl, replace).
	Flags uint16 `json:"flags,omitempty"`
	// Errno is the kernel's answer (0: accepted; ESRCH, EEXIST ...);
	// Answered says whether the trace saw the answer.
	Errno    int    `json:"errno,omitempty"`
	Answered bool   `json:"answered,omitempty"`
	Comm     string `json:"comm,omitempty"`
}
