package timing

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/birdcage/birdcage/internal/monoclock"
)

// Model is how long the components birdcage stands in for take to
// react, as named knobs. Every figure that depends on them (a live change's
// gap above all) is a function of this model, not of how fast the harness
// happens to be, and every ScenarioResult records the model it ran under.
//
// The delays are real behaviour of the processes, not sleeps in the
// harness: the programmer's restart profile is implemented by the
// programmer process (dataplane/programmer.RestartProfile), and confd's
// latency by each node's confd goroutine before it renders.
type Model struct {
	// Name says where the values came from: "realistic" (the defaults
	// below), "zero", or either with environment overrides ("+env").
	Name string
	// ProgrammerStartupDelay is the fixed part of a programmer restart:
	// from the new process's start to its first programming pass.
	ProgrammerStartupDelay time.Duration
	// ProgrammerResyncPerRoute is added per desired route: the part of a
	// restart that is a full datastore resync and grows with the cluster.
	ProgrammerResyncPerRoute time.Duration
	// ConfdLatency is confd's react-and-render latency per node: from a
	// datastore change reaching a node's confd to its render and
	// `birdc configure`.
	ConfdLatency time.Duration
	// ConfdConcurrent: one confd per node, each reacting to the datastore
	// on its own (as in the calico/node container). False plays a single
	// confd that reconfigures every node's BIRD in turn, so node N lags by
	// N renders (the harness's behaviour before this model).
	ConfdConcurrent bool
	// BIRDScanTime is BIRD's kernel protocol scan time: how long a route
	// BIRD failed to write (or that someone removed) can stay missing
	// before BIRD writes it again. It is the renderer's "scan time" and is
	// rendered into every BIRD config (whole seconds).
	BIRDScanTime time.Duration
}

// Validate checks the knobs.
func (m Model) Validate() error {
	switch {
	case m.ProgrammerStartupDelay < 0, m.ProgrammerResyncPerRoute < 0, m.ConfdLatency < 0:
		return fmt.Errorf("timing model %s: delays must not be negative", m)
	case m.BIRDScanTime < 0 || m.BIRDScanTime%time.Second != 0:
		return fmt.Errorf("timing model %s: BIRD's scan time is whole seconds (BIRD's unit), got %s", m, m.BIRDScanTime)
	}
	return nil
}

func (m Model) String() string {
	c := "one confd per node"
	if !m.ConfdConcurrent {
		c = "one confd for all nodes, in turn"
	}
	return fmt.Sprintf("%s (programmer restart %s + %s/route, confd %s per node, %s, BIRD scan %s)",
		m.Name, m.ProgrammerStartupDelay, m.ProgrammerResyncPerRoute, m.ConfdLatency, c, m.BIRDScanTime)
}

// timingJSON is the model as it appears in results: durations as text
// ("1s") and in ms, so a reader needs neither Go nor nanoseconds.
type timingJSON struct {
	Name                       string  `json:"name"`
	ProgrammerStartupDelay     string  `json:"programmerStartupDelay"`
	ProgrammerStartupDelayMs   float64 `json:"programmerStartupDelayMs"`
	ProgrammerResyncPerRoute   string  `json:"programmerResyncPerRoute"`
	ProgrammerResyncPerRouteUs float64 `json:"programmerResyncPerRouteUs"`
	ConfdLatency               string  `json:"confdLatency"`
	ConfdLatencyMs             float64 `json:"confdLatencyMs"`
	ConfdConcurrent            bool    `json:"confdConcurrent"`
	BIRDScanTime               string  `json:"birdScanTime"`
	BIRDScanTimeMs             float64 `json:"birdScanTimeMs"`
}

// MarshalJSON writes the model as timingJSON.
func (m Model) MarshalJSON() ([]byte, error) {
	return json.Marshal(timingJSON{
		Name:                   m.Name,
		ProgrammerStartupDelay: m.ProgrammerStartupDelay.String(), ProgrammerStartupDelayMs: monoclock.Ms(int64(m.ProgrammerStartupDelay)),
		ProgrammerResyncPerRoute: m.ProgrammerResyncPerRoute.String(), ProgrammerResyncPerRouteUs: float64(m.ProgrammerResyncPerRoute) / float64(time.Microsecond),
		ConfdLatency: m.ConfdLatency.String(), ConfdLatencyMs: monoclock.Ms(int64(m.ConfdLatency)),
		ConfdConcurrent: m.ConfdConcurrent,
		BIRDScanTime:    m.BIRDScanTime.String(), BIRDScanTimeMs: monoclock.Ms(int64(m.BIRDScanTime)),
	})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (m *Model) UnmarshalJSON(b []byte) error {
	var j timingJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var err error
	parse := func(s string) time.Duration {
		if s == "" || err != nil {
			return 0
		}
		var d time.Duration
		d, err = time.ParseDuration(s)
		return d
	}
	*m = Model{Name: j.Name, ProgrammerStartupDelay: parse(j.ProgrammerStartupDelay),
		ProgrammerResyncPerRoute: parse(j.ProgrammerResyncPerRoute), ConfdLatency: parse(j.ConfdLatency),
		ConfdConcurrent: j.ConfdConcurrent, BIRDScanTime: parse(j.BIRDScanTime)}
	return err
}
