package harness

import "github.com/birdcage/birdcage/instrument/probe"

// ProbeProgress is what the cluster's probe sessions have sent and lost so
// far, for a person watching a long run: probes still in flight count as
// lost until they arrive, so a running session's loss is an upper bound.
// Sessions that can no longer report (closed without a report) are left out.
func (m *Measure) ProbeProgress() (sent uint64, lost int64, flows int) {
	m.c.mu.Lock()
	sessions := append([]*probe.Session(nil), m.c.sessions...)
	m.c.mu.Unlock()
	for _, s := range sessions {
		rep, err := s.Report()
		if err != nil {
			continue
		}
		sent += rep.Total.Sent
		lost += rep.Total.Lost
		flows += rep.Total.Flows
	}
	return sent, lost, flows
}
