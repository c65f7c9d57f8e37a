// Package control is how `birdcage` verbs drive a live cluster: the process
// that runs `birdcage up --cluster` (the supervisor) serves a unix socket in
// the run's state dir, and each verb sends it one request. Every action the
// server takes is a harness.Cluster method, the same call a scenario makes,
// so nothing is implemented twice.
//
// The protocol: one JSON Request per connection; the server streams JSON
// Lines back (events stamped on the run's monotonic clock, text, live and
// final tables) and ends with one Line of kind "status". The socket is mode
// 0600 and the server serves only peers with uid 0.
package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/birdcage/birdcage/internal/run"
)

// SocketName is the control socket's name in the run's state dir.
const SocketName = "control.sock"

// ErrNoCluster is returned by Find when no supervisor is up.
var ErrNoCluster = errors.New("no birdcage cluster is up: start one with birdcage up --cluster")

// Request is one verb with its arguments.
type Request struct {
	Verb string `json:"verb"` // info, upgrade, set, bird, probe, timeline, birdc, routes, down
	Node string `json:"node,omitempty"`
	// upgrade; Programmer, when set, is a programmer binary (an absolute
	// path on the supervisor's host) the node runs from the upgrade on.
	To         string `json:"to,omitempty"`
	Programmer string `json:"programmer,omitempty"`
	// upgrade of a calico node: the image directory (absolute) its new
	// pod runs; empty restarts the pod from its image.
	Calico string `json:"calico,omitempty"`
	// upgrade, bird kill: KILL or TERM
	Signal string `json:"signal,omitempty"`
	// bird: kill or start; Recovery starts it with -R.
	Action   string `json:"action,omitempty"`
	Recovery bool   `json:"recovery,omitempty"`
	// set
	Settings Settings `json:"settings,omitzero"`
	// probe: For is a Go duration ("10s"); Rate probes/s per flow (0:
	// the harness default); Live asks for a gap table every second.
	For  string `json:"for,omitempty"`
	Rate int    `json:"rate,omitempty"`
	Live bool   `json:"live,omitempty"`
	// timeline: Prefix limits it to routes inside a prefix; All shows
	// every route, not only those inside the cluster's pools.
	Prefix string `json:"prefix,omitempty"`
	All    bool   `json:"all,omitempty"`
	// birdc
	Command []string `json:"command,omitempty"`
	// Wait bounds how long a verb waits for the cluster to settle after its
	// action (Go duration; default 60s).
	Wait string `json:"wait,omitempty"`
}

// Line kinds.
const (
	KindEvent  = "event"  // something the harness did or saw, at Mono
	KindText   = "text"   // output to print as is
	KindLive   = "live"   // a running table, replaced by the next one
	KindReport = "report" // a final table, with Data
	KindStatus = "status" // the last line: OK or Error
)

// Line is one line of a reply.
type Line struct {
	Kind string `json:"kind"`
	// Mono is CLOCK_MONOTONIC ns, the clock of probes, BPF and the route
	// timeline; RunMs is the same instant in ms since the cluster's Start.
	Mono  int64   `json:"mono,omitempty"`
	RunMs float64 `json:"runMs,omitempty"`
	Text  string  `json:"text,omitempty"`
	// Summary is a live table in one line, for output that is not a
	// terminal.
	Summary string          `json:"summary,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	// OK and Error end the reply (Kind status).
	OK    bool   `json:"ok,omitempty"`
	Error string `json:"error,omitempty"`
}

// Socket is the control socket path of a run.
func Socket(runID string) string { return filepath.Join(run.StateRoot, runID, SocketName) }

// Runs lists the runs whose supervisor is up (a control socket and a live
// owner), sorted.
func Runs() []string {
	paths, _ := filepath.Glob(filepath.Join(run.StateRoot, "*", SocketName))
	var ids []string
	for _, p := range paths {
		id := filepath.Base(filepath.Dir(p))
		if run.Alive(id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// Find returns the control socket of the named run, or of the only cluster
// up when runID is empty.
func Find(runID string) (string, error) {
	ids := Runs()
	if runID != "" {
		for _, id := range ids {
			if id == runID {
				return Socket(id), nil
			}
		}
		if len(ids) == 0 {
			return "", fmt.Errorf("run %s: %w", runID, ErrNoCluster)
		}
		return "", fmt.Errorf("run %s: no such cluster up (up: %s)", runID, strings.Join(ids, ", "))
	}
	switch len(ids) {
	case 0:
		return "", ErrNoCluster
	case 1:
		return Socket(ids[0]), nil
	}
	return "", fmt.Errorf("several birdcage clusters are up (%s): pick one with --run ID", strings.Join(ids, ", "))
}

// Do sends req to the supervisor at socket and hands every line but the
// status to fn; it returns the status's error, or an error when the reply
// ends without one. Cancelling ctx closes the connection, which ends the
// server's side of the request (a probe session stops).
func Do(ctx context.Context, socket string, req Request, fn func(Line) error) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ErrNoCluster
		}
		return fmt.Errorf("supervisor %s: %w", socket, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return fmt.Errorf("supervisor %s: send: %w", socket, err)
	}
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for sc.Scan() {
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("supervisor %s: bad reply line %q: %w", socket, sc.Text(), err)
		}
		if l.Kind == KindStatus {
			if l.OK {
				return nil
			}
			return errors.New(l.Error)
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("supervisor %s ended the reply without a status (it may have exited: see supervisor.log in its run dir): %v", socket, sc.Err())
}
