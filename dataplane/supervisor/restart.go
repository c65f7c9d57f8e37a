package supervisor

import "time"

// Restart is one exit of a supervised programmer and what followed.
type Restart struct {
	ExitCode int   `json:"exitCode"`
	ExitMono int64 `json:"exitMono"` // CLOCK_MONOTONIC ns
	// StartMono is when the replacement was started (0: not restarted),
	// PID the replacement's process id.
	StartMono int64 `json:"startMono"`
	PID       int   `json:"pid,omitempty"`
	// SyncedMono is the replacement's first completed sync (0: not yet).
	SyncedMono int64 `json:"syncedMono"`
	// ProcessStartMono, ProgrammedMono and StartupDelayNs are the
	// replacement's own account (its status file): when it started, when
	// its first programming pass began, and the restart profile's delay
	// it applied. 0 where the binary does not report them.
	ProcessStartMono int64         `json:"processStartMono,omitempty"`
	ProgrammedMono   int64         `json:"programmedMono,omitempty"`
	StartupDelayNs   int64         `json:"startupDelayNs,omitempty"`
	Reason           RestartReason `json:"reason"`
}

// RestartReason is why a supervised programmer exited.
type RestartReason string

const (
	// ReasonConfigChanged: it exited with dataplane/programmer's
	// ExitConfigChanged (129), Felix's restart on a config change.
	ReasonConfigChanged RestartReason = "config changed"
	// ReasonCrash: any other exit the supervisor did not ask for.
	ReasonCrash RestartReason = "crash"
)

// ToFirstProgram is exit to the replacement's first programming pass
// (0: unknown).
func (r Restart) ToFirstProgram() time.Duration {
	if r.ProgrammedMono == 0 {
		return 0
	}
	return time.Duration(r.ProgrammedMono - r.ExitMono)
}

// Duration is exit to first sync of the replacement: how long nothing
// programmed this node's routes.
func (r Restart) Duration() time.Duration {
	if r.SyncedMono == 0 {
		return 0
	}
	return time.Duration(r.SyncedMono - r.ExitMono)
}
