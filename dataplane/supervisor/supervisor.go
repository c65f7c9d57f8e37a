// Package supervisor runs one node's route programmer the way the node
// container does: it starts the process inside the node's network
// namespace, restarts it when it exits for a config change (Felix's restart
// rule) or crashes (a pod's restart policy), and records every restart with
// the replacement's first sync, so a scenario can say how long a node's
// routes had nobody programming them.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/birdcage/birdcage/dataplane/programmer"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/machine"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/run"
)

// Programmer supervises one node's route programmer process like the node
// container does: it restarts it when it exits for a config change (and,
// like a pod's restart policy, after a crash), and records every restart.
type Programmer struct {
	node    string
	nsPath  string
	binary  string
	store   string
	dir     string
	env     []string
	log     *slog.Logger
	release config.Release
	// exitWait is how long a signalled process may take to exit.
	exitWait time.Duration

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current process exits
	stopping bool
	restarts []Restart
	logFile  *os.File
}

// Config says what to supervise.
type Config struct {
	Node    string         // the node's name (--node)
	Netns   string         // path of the node's network namespace
	Binary  string         // the programmer binary (dataplane/programmer's process contract)
	Store   string         // the datastore directory (--datastore)
	Release config.Release // the release it starts as (--release)
	// Env is added to the process's environment (the restart profile of
	// timing.Model).
	Env []string
	Log *slog.Logger
	// Machine stretches the wait for the process to exit after a signal
	// (10 s at native speed) before it is killed.
	Machine machine.Profile
}

// New prepares a supervisor for c.Node under the run (its state in the
// run's programmer/<node> dir, stopped when the run closes); Start starts
// the process.
func New(r *run.Run, c Config) (*Programmer, error) {
	node, log := c.Node, c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := r.Path("programmer", node)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "programmer.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	p := &Programmer{node: node, nsPath: c.Netns, binary: c.Binary, store: c.Store, dir: dir, release: c.Release,
		env: c.Env, log: log.With("programmer", node), logFile: f, exitWait: c.Machine.Wait(10 * time.Second)}
	r.Defer("programmer "+node, func() error {
		err := p.Stop(context.Background())
		f.Close()
		return err
	})
	return p, nil
}

// StatusPath is the programmer's status file.
func (p *Programmer) StatusPath() string { return filepath.Join(p.dir, "status.json") }

// LogPath is where its stderr goes, across restarts.
func (p *Programmer) LogPath() string { return p.logFile.Name() }

// Release is the release the running process was started with.
func (p *Programmer) Release() config.Release {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.release
}

// Status reads the status file.
func (p *Programmer) Status() (programmer.Status, error) {
	return programmer.ReadStatus(p.StatusPath())
}

// Restarts lists every exit so far, with the replacement's first sync
// where it has happened.
func (p *Programmer) Restarts() []Restart {
	p.noteSync()
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Restart(nil), p.restarts...)
}

// Start starts the process (with release rel) and supervises it.
// Binary is the programmer binary the next Start runs.
func (p *Programmer) Binary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.binary
}

// SetBinary changes the binary the next Start runs (an upgrade that also
// replaces the programmer build); the programmer must not be running.
func (p *Programmer) SetBinary(path string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("programmer %s: running; stop it before changing its binary", p.node)
	}
	p.binary = path
	return nil
}

func (p *Programmer) Start(rel config.Release) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("programmer %s: already running", p.node)
	}
	p.release, p.stopping = rel, false
	return p.startLocked()
}

func (p *Programmer) startLocked() error {
	_ = os.Remove(p.StatusPath()) // a stale status must not count as a sync
	cmd := exec.Command(p.binary, "--node", p.node, "--datastore", p.store, "--release", string(p.release),
		"--status", p.StatusPath(), "--log-format", "json")
	cmd.Stdout, cmd.Stderr = p.logFile, p.logFile
	// The restart profile goes by environment, which a user's own binary
	// without the flags ignores (dataplane/programmer's process contract).
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The child inherits the network namespace of the thread that forks
	// it, so start it from a thread inside the node's namespace.
	netns, err := ns.GetNS(p.nsPath)
	if err != nil {
		return fmt.Errorf("programmer %s: %w", p.node, err)
	}
	defer netns.Close()
	if err := netns.Do(func(ns.NetNS) error { return cmd.Start() }); err != nil {
		return fmt.Errorf("programmer %s: start %s: %w", p.node, p.binary, err)
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	p.log.Info("programmer started", "pid", cmd.Process.Pid, "release", p.release)
	go p.wait(cmd, p.exited)
	return nil
}

func (p *Programmer) wait(cmd *exec.Cmd, exited chan struct{}) {
	err := cmd.Wait()
	now := monoclock.Now()
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	close(exited)
	p.cmd = nil
	if p.stopping {
		return
	}
	reason := ReasonCrash
	if code == programmer.ExitConfigChanged {
		reason = ReasonConfigChanged
	}
	rs := Restart{ExitCode: code, ExitMono: now, Reason: reason}
	p.log.Info("programmer exited; restarting", "code", code, "reason", reason, "err", err)
	// The start is stamped before the replacement exists: with no restart
	// delay it can finish its first sync before startLocked returns, and a
	// stamp taken after would not count that sync as the replacement's.
	start := monoclock.Now()
	if err := p.startLocked(); err != nil {
		p.log.Error("programmer restart failed", "err", err)
	} else {
		rs.StartMono, rs.PID = start, p.cmd.Process.Pid
	}
	p.restarts = append(p.restarts, rs)
}

// noteSync fills in SyncedMono of restarts whose replacement has synced.
func (p *Programmer) noteSync() {
	st, err := p.Status()
	if err != nil || st.FirstSyncMonotonicNano == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.restarts {
		r := &p.restarts[i]
		// The status is the replacement's own when it carries its pid.
		if r.SyncedMono == 0 && r.StartMono != 0 && st.PID == r.PID && st.FirstSyncMonotonicNano > r.StartMono {
			r.SyncedMono = st.FirstSyncMonotonicNano
			r.ProcessStartMono = st.StartedMonotonicNano
			r.ProgrammedMono = st.FirstProgramMonotonicNano
			r.StartupDelayNs = st.StartupDelayNano
		}
	}
}

// Synced reports whether the running process has completed a sync pass
// after monotonic time since, and is the process of that release.
func (p *Programmer) Synced(since int64) bool {
	st, err := p.Status()
	return err == nil && st.State == programmer.StateRunning && st.LastSyncMonotonicNano > since
}

// Running reports whether a process is up.
func (p *Programmer) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// Stop stops supervision and the process with SIGTERM (its routes stay in
// the kernel, as when Felix stops).
func (p *Programmer) Stop(ctx context.Context) error { return p.signal(ctx, syscall.SIGTERM) }

// Kill stops supervision and SIGKILLs the process.
func (p *Programmer) Kill(ctx context.Context) error { return p.signal(ctx, syscall.SIGKILL) }

func (p *Programmer) signal(ctx context.Context, sig syscall.Signal) error {
	p.mu.Lock()
	p.stopping = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("programmer %s: %s: %w", p.node, sig, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.exitWait)
	defer cancel()
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("programmer %s: did not exit within %s of %s; killed", p.node, p.exitWait, sig)
	}
}

// Pid is the programmer's pid, 0 when it is not running.
func (p *Programmer) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
