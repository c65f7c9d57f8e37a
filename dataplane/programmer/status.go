package programmer

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// Exit codes of the programmer process; see the package documentation.
const (
	ExitOK            = 0
	ExitError         = 1
	ExitUsage         = 2
	ExitConfigChanged = 129
)

// States written to the status file.
const (
	StateStarting      = "starting"
	StateRunning       = "running"
	StateConfigChanged = "config-changed"
	StateStopped       = "stopped"
)

// Status is the content of the status file.
type Status struct {
	Node    string `json:"node"`
	Release string `json:"release"`
	PID     int    `json:"pid"`
	State   string `json:"state"`

	// ProgramClusterRoutes is the effective value (after defaulting).
	ProgramClusterRoutes        string `json:"programClusterRoutes"`
	ProgramIPIPClusterRoutes    bool   `json:"programIPIPClusterRoutes"`
	ProgramNoEncapClusterRoutes bool   `json:"programNoEncapClusterRoutes"`
	ClaimsBIRDTunnelRoutes      bool   `json:"claimsBIRDTunnelRoutes"`
	DeviceRouteProtocol         int    `json:"deviceRouteProtocol"`
	RouteRefreshInterval        string `json:"routeRefreshInterval"`
	// The route table's emulation choices in force (the release's unless
	// a knob changed one).
	WriteOrder          string `json:"writeOrder,omitempty"`
	DeleteNamesProtocol bool   `json:"deleteNamesProtocol,omitempty"`
	TunnelMTU           int    `json:"tunnelMTU,omitempty"`
	WriteWindow         int    `json:"writeWindow,omitempty"`
	// IPv4Metric is the metric IPv4 routes are written at (0 as released).
	IPv4Metric int `json:"ipv4Metric"`

	// LastSync is the end of the last sync pass that had no errors.
	LastSyncUnixNano      int64 `json:"lastSyncUnixNano"`
	LastSyncMonotonicNano int64 `json:"lastSyncMonotonicNano"`
	// FirstSyncMonotonicNano is this process's first completed sync: with
	// the previous process's exit, how long a restart left the node's
	// routes unattended.
	FirstSyncMonotonicNano int64 `json:"firstSyncMonotonicNano"`
	// StartedMonotonicNano is the process's start (the anchor of its
	// restart profile), StartupDelayNano the profile's delay it applied,
	// and FirstProgramMonotonicNano the start of its first programming
	// pass (the earliest a route can have been written).
	StartedMonotonicNano      int64 `json:"startedMonotonicNano,omitempty"`
	StartupDelayNano          int64 `json:"startupDelayNano,omitempty"`
	FirstProgramMonotonicNano int64 `json:"firstProgramMonotonicNano,omitempty"`
	// LastResync is the end of the last full kernel re-read.
	LastResyncUnixNano int64 `json:"lastResyncUnixNano"`

	RoutesDesired int    `json:"routesDesired"`
	RoutesOwned   int    `json:"routesOwned"`
	SyncErrors    int    `json:"syncErrors"`
	LastError     string `json:"lastError,omitempty"`
}

// ReadStatus reads a status file.
func ReadStatus(path string) (Status, error) {
	var s Status
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("read programmer status: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("read programmer status %s: %w", path, err)
	}
	return s, nil
}

func writeStatus(path string, s Status) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	if err := datastore.WriteFileAtomic(path, append(b, '\n')); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}
