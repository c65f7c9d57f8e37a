package main

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// runProgress turns the suite's output into what a person watching
// `birdcage run` needs. On a terminal: one status line rewritten in place
// (the running spec, its elapsed time, probes sent and lost so far) and a
// permanent line per finished spec; the suite's full output goes to the
// log only. Not on a terminal (CI logs): every line of the suite as it
// comes, with the per-second probe lines thinned to one every 10 s per spec.
type runProgress struct {
	out io.Writer
	log io.Writer // the full output; may be nil
	tty bool
	now func() time.Time

	spec        string
	started     time.Time
	sent        uint64
	lost        int64
	lastPlain   time.Time
	statusShown bool
	// kept is how to get into a cluster the suite kept (--keep-on-fail).
	kept []string
}

var (
	progressStart  = regexp.MustCompile(`^\[birdcage\] progress start (.*)$`)
	progressProbes = regexp.MustCompile(`^\[birdcage\] progress probes sent=(\d+) lost=(-?\d+)`)
	specEnd        = regexp.MustCompile(`^\[birdcage\] spec (\S+)\s+([\d.]+)s\s+(.*)$`)
)

// keptPrefix starts the suite's lines about a kept cluster (scenarios/keep_test.go).
const keptPrefix = "[birdcage] kept: "

// plainProbeEvery is how often a non-terminal run prints a probe line.
const plainProbeEvery = 10 * time.Second

func (p *runProgress) line(l string) {
	if p.log != nil {
		fmt.Fprintln(p.log, l)
	}
	now := p.now()
	switch {
	case progressStart.MatchString(l):
		p.spec = progressStart.FindStringSubmatch(l)[1]
		p.started, p.sent, p.lost, p.lastPlain = now, 0, 0, now
		if !p.tty {
			fmt.Fprintf(p.out, "start %s\n", p.spec)
			return
		}
		p.status()
	case progressProbes.MatchString(l):
		m := progressProbes.FindStringSubmatch(l)
		p.sent, _ = strconv.ParseUint(m[1], 10, 64)
		p.lost, _ = strconv.ParseInt(m[2], 10, 64)
		if !p.tty {
			if now.Sub(p.lastPlain) >= plainProbeEvery {
				p.lastPlain = now
				fmt.Fprintf(p.out, "  %s: %s, probes sent %d, lost %d so far\n", p.spec, now.Sub(p.started).Round(time.Second), p.sent, p.lost)
			}
			return
		}
		p.status()
	case strings.HasPrefix(l, keptPrefix):
		// How to get into a kept cluster: shown in both modes, and again
		// after the summary.
		k := strings.TrimPrefix(l, keptPrefix)
		p.kept = append(p.kept, k)
		if p.tty {
			p.clearStatus()
		}
		fmt.Fprintln(p.out, "kept: "+k)
		if p.tty && p.spec != "" {
			p.status()
		}
	case specEnd.MatchString(l):
		m := specEnd.FindStringSubmatch(l)
		if p.tty {
			p.clearStatus()
			fmt.Fprintf(p.out, "%-7s %6ss  %s\n", strings.ToUpper(m[1]), m[2], m[3])
		} else {
			fmt.Fprintln(p.out, l)
		}
		p.spec = ""
	default:
		if !p.tty {
			fmt.Fprintln(p.out, l)
		}
	}
}

// tick redraws the status line (elapsed time moves on without input).
func (p *runProgress) tick() {
	if p.tty && p.spec != "" {
		p.status()
	}
}

func (p *runProgress) status() {
	if p.spec == "" {
		return
	}
	s := fmt.Sprintf("running %s  %s", p.spec, p.now().Sub(p.started).Round(100*time.Millisecond))
	if p.sent > 0 {
		s += fmt.Sprintf("  probes sent %d lost %d", p.sent, p.lost)
	}
	fmt.Fprintf(p.out, "\r\x1b[K%s", s)
	p.statusShown = true
}

func (p *runProgress) clearStatus() {
	if p.statusShown {
		fmt.Fprint(p.out, "\r\x1b[K")
		p.statusShown = false
	}
}

// finish clears the status line before the summary.
func (p *runProgress) finish() {
	if p.tty {
		p.clearStatus()
	}
}
