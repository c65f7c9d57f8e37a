package harness

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/birdcage/birdcage/internal/procfs"
)

// Footprint is what a running cluster costs the machine in memory: the
// resident set of every BIRD (nodes and routers), of every programmer, and
// of this process (probes, timelines, the harness itself).
type Footprint struct {
	BIRDBytes, ProgrammerBytes, HarnessBytes int64
	BIRDs, Programmers                       int
}

// Total is the sum of the three.
func (f Footprint) Total() int64 { return f.BIRDBytes + f.ProgrammerBytes + f.HarnessBytes }

// Footprint reads VmRSS of every process the cluster runs.
func (m *Measure) Footprint() (Footprint, error) {
	var f Footprint
	var err error
	if f.HarnessBytes, err = procfs.RSS(os.Getpid()); err != nil {
		return f, err
	}
	add := func(pid int, bytes *int64, count *int) error {
		if pid == 0 {
			return nil
		}
		n, err := procfs.RSS(pid)
		if err != nil {
			return err
		}
		*bytes += n
		*count++
		return nil
	}
	for _, n := range m.c.nodes {
		if n.Calico != nil {
			continue // Calico's pod is not the model's footprint
		}
		if err := add(n.BIRD.Pid(), &f.BIRDBytes, &f.BIRDs); err != nil {
			return f, fmt.Errorf("node %s bird: %w", n.Name, err)
		}
		if err := add(n.Programmer.Pid(), &f.ProgrammerBytes, &f.Programmers); err != nil {
			return f, fmt.Errorf("node %s programmer: %w", n.Name, err)
		}
	}
	for _, r := range m.c.routers {
		if err := add(r.BIRD.Pid(), &f.BIRDBytes, &f.BIRDs); err != nil {
			return f, fmt.Errorf("router %s bird: %w", r.Name, err)
		}
	}
	return f, nil
}

// ProcessCPU is the CPU time (user + system) this process — the harness:
// probe senders and receivers, route timelines, confd, supervisors — has
// used so far; the difference over a window divided by the window is the
// harness's own load in CPU-seconds per second.
func ProcessCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
