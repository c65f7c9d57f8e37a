package scenarios_test

// Probe helpers more than one family uses.

import (
	"fmt"

	"github.com/birdcage/birdcage/instrument/probe"
)

// flowsDelivering returns a check that fails until every flow has received
// more probes than it had when flowsDelivering was called.
func flowsDelivering(s *probe.Session) func() error {
	base := map[string]uint64{}
	if rep, err := s.Report(); err == nil {
		for _, f := range rep.Flows {
			base[f.Flow] = f.Received
		}
	}
	return func() error {
		rep, err := s.Report()
		if err != nil {
			return err
		}
		for _, f := range rep.Flows {
			if f.Received <= base[f.Flow] {
				return fmt.Errorf("flow %s has delivered nothing since the routes moved (%d received)", f.Flow, f.Received)
			}
		}
		return nil
	}
}
