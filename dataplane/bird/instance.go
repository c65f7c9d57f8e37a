package bird

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/birdcage/birdcage/internal/machine"
	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/procfs"
	"github.com/birdcage/birdcage/internal/run"
)

// ConfigFile is the config's name in the node's config dir (/etc/bird
// inside the container).
const ConfigFile = "bird.conf"

// SocketFile is the control socket's name in the node's socket dir
// (/run/bird inside the container).
const SocketFile = "bird.ctl"

// maxSocketPath is the limit of sun_path, NUL included.
const maxSocketPath = 108

// ErrNotRunning is returned by operations that need a running BIRD.
var ErrNotRunning = errors.New("bird is not running")

// ErrInvalidConfig is wrapped when `bird -p` rejects a config.
var ErrInvalidConfig = errors.New("bird rejects the config")

// Options configure one BIRD instance.
type Options struct {
	// Name is the node or router name; it names the container
	// (<run prefix>bird-<name>) and the instance's dir in the run dir.
	Name string
	// NetNS is the named network namespace BIRD joins.
	NetNS string
	// Runtime runs the container; nil means runc with per-run state.
	Runtime Runtime
	// Log receives lifecycle events; nil means slog.Default().
	Log *slog.Logger
	// Release is the BIRD release to run (FindRelease); the zero value is
	// the host's BIRD.
	Release Release
	// Daemon is the binary to run: "bird" (default) or, for a 1.6 node's
	// IPv6 half, "bird6". It names the config (bird6.conf) and control
	// socket (bird6.ctl) too.
	Daemon string
	// Machine stretches the instance's own waits (removing its container,
	// runc's signals); the zero profile is a machine at native speed.
	Machine machine.Profile
}

// Instance is one BIRD daemon of one node (or router) across restarts.
type Instance struct {
	name    string
	id      string
	netns   string
	dir     string // r.Path("bird", name)
	confDir string
	sockDir string
	logPath string
	rt      Runtime
	log     *slog.Logger
	client  *Client
	rel     Release
	daemon  string
	run     *run.Run
	opts    Options
	six     *Instance // 1.x: the node's bird6, driven with this bird (pair.go)

	mu sync.Mutex
	c  Container
}

var runtimes sync.Map // run dir -> *Runc, one state root per run

// New prepares the instance's dirs (registered for removal with r) but
// does not start BIRD; write a config with WriteConfig first.
func New(r *run.Run, o Options) (*Instance, error) {
	if o.Name == "" || strings.ContainsAny(o.Name, "/ ") {
		return nil, fmt.Errorf("bird instance name %q: must be a non-empty name without / or spaces", o.Name)
	}
	if o.NetNS == "" {
		return nil, fmt.Errorf("bird instance %q: NetNS: the node's named network namespace is required", o.Name)
	}
	b := &Instance{
		name:  o.Name,
		id:    r.Name("bird-" + o.Name),
		netns: o.NetNS,
		dir:   r.Path("bird", o.Name),
		rt:    o.Runtime,
		log:   o.Log,
		rel:   o.Release,
		run:   r,
		opts:  o,
	}
	if b.rel.Name == "" {
		b.rel = HostRelease()
	}
	switch o.Daemon {
	case "", "bird":
		b.daemon = "bird"
	case "bird6":
		if !b.rel.Name.TwoDaemons() {
			return nil, fmt.Errorf("bird instance %q: daemon bird6 exists only in BIRD 1.x, not %s", o.Name, b.rel.Name)
		}
		b.daemon = "bird6"
	default:
		return nil, fmt.Errorf("bird instance %q: daemon %q: want bird or bird6", o.Name, o.Daemon)
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	b.log = b.log.With("bird", o.Name)
	b.confDir = filepath.Join(b.dir, "etc")
	b.sockDir = filepath.Join(b.dir, "run")
	b.logPath = filepath.Join(b.dir, "bird.log")
	b.client = &Client{Socket: filepath.Join(b.sockDir, b.socketFile())}
	if len(b.client.Socket) >= maxSocketPath {
		return nil, fmt.Errorf("bird instance %q: control socket path %s is %d bytes; unix sockets allow %d: use a shorter name", o.Name, b.client.Socket, len(b.client.Socket), maxSocketPath-1)
	}
	if b.rt == nil {
		rt, _ := runtimes.LoadOrStore(r.Dir, &Runc{StateRoot: r.Path("runc"), BundleRoot: r.Path("bundles"), Machine: o.Machine})
		b.rt = rt.(*Runc)
	}
	for _, d := range []string{b.confDir, b.sockDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("bird instance %q: %w", o.Name, err)
		}
	}
	if err := b.ensurePair(); err != nil {
		return nil, err
	}
	r.Defer("bird dir "+b.dir, func() error { return os.RemoveAll(b.dir) })
	r.Defer("bird container "+b.id, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), o.Machine.Wait(20*time.Second))
		defer cancel()
		return b.remove(ctx)
	})
	return b, nil
}

// Name is the node or router name.
func (b *Instance) Name() string { return b.name }

// ContainerID is the container's id (it carries the run prefix).
func (b *Instance) ContainerID() string { return b.id }

// Client is the birdc client for this instance's control socket.
func (b *Instance) Client() *Client { return b.client }

// LogPath is the file BIRD's stderr (and runc's) is appended to.
func (b *Instance) LogPath() string { return b.logPath }

// ConfigPath is the host path of the current bird.conf (bird6.conf for
// 1.6's bird6).
func (b *Instance) ConfigPath() string { return filepath.Join(b.confDir, b.configFile()) }

// Release is the BIRD release this instance runs.
func (b *Instance) Release() Release {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rel
}

// Daemon is the binary this instance runs ("bird" or "bird6").
func (b *Instance) Daemon() string { return b.daemon }

func (b *Instance) configFile() string {
	if b.daemon == "bird6" {
		return "bird6.conf"
	}
	return ConfigFile
}

func (b *Instance) socketFile() string {
	if b.daemon == "bird6" {
		return "bird6.ctl"
	}
	return SocketFile
}

// Validate runs the host BIRD's `bird -p` (parse only) on conf.
func Validate(conf []byte) error {
	if _, err := exec.LookPath("/usr/sbin/bird"); err != nil {
		return fmt.Errorf("validate config: %w (Debian package bird2)", err)
	}
	return HostRelease().Validate("bird", conf)
}

// WriteConfig validates conf with `bird -p` and, if BIRD accepts it,
// replaces bird.conf atomically. A rejected config leaves the old file.
// On 1.x conf carries bird.conf and bird6.conf (release.Bundle); both are
// validated before either is written.
func (b *Instance) WriteConfig(conf []byte) error {
	if six := b.pair(); six != nil {
		c4, c6, err := b.splitPair(conf)
		if err != nil {
			return err
		}
		if err := six.validate(c6); err != nil {
			return fmt.Errorf("bird %s: %w", six.name, err)
		}
		if err := b.writeConfig(c4); err != nil {
			return err
		}
		return six.writeConfig(c6)
	}
	return b.writeConfig(conf)
}

func (b *Instance) writeConfig(conf []byte) error {
	if err := b.validate(conf); err != nil {
		return fmt.Errorf("bird %s: %w", b.name, err)
	}
	tmp := filepath.Join(b.confDir, "."+b.configFile()+".tmp")
	if err := os.WriteFile(tmp, conf, 0o644); err != nil {
		return fmt.Errorf("bird %s: write config: %w", b.name, err)
	}
	if err := os.Rename(tmp, b.ConfigPath()); err != nil {
		return fmt.Errorf("bird %s: write config: %w", b.name, err)
	}
	return nil
}

// validate is `bird -p` of this instance's release and daemon.
func (b *Instance) validate(conf []byte) error { return b.Release().Validate(b.daemon, conf) }

// Start starts BIRD (on 1.x: bird and bird6) and returns once it answers
// on its control socket.
func (b *Instance) Start(ctx context.Context) error { return b.startDaemons(ctx, false) }

// StartRecovery starts BIRD with -R (graceful restart recovery): it holds
// the kernel routes it finds until its peers have re-sent theirs.
func (b *Instance) StartRecovery(ctx context.Context) error { return b.startDaemons(ctx, true) }

func (b *Instance) start(ctx context.Context, recovery bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c != nil {
		select {
		case <-b.c.Done():
			if err := b.c.Delete(ctx); err != nil {
				return err
			}
			b.c = nil
		default:
			return fmt.Errorf("bird %s: already running (container %s)", b.name, b.id)
		}
	}
	if _, err := os.Stat(b.ConfigPath()); err != nil {
		return fmt.Errorf("bird %s: no config: call WriteConfig first: %w", b.name, err)
	}
	args := []string{"/usr/sbin/" + b.daemon, "-f", "-c", "/etc/bird/" + b.configFile(), "-s", "/run/bird/" + b.socketFile()}
	if recovery {
		args = append(args, "-R")
	}
	mark := fmt.Sprintf("=== birdcage: %s start %s (recovery=%v) container %s release %s (%s) %s\n", time.Now().Format(time.RFC3339Nano), b.name, recovery, b.id, b.rel.Name, b.rel.Package, b.daemon)
	if f, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		_, _ = f.WriteString(mark)
		f.Close()
	}
	c, err := b.rt.Run(ctx, ContainerSpec{
		ID: b.id, Hostname: b.name, NetNSPath: nsutil.Path(b.netns),
		ConfigDir: b.confDir, SocketDir: b.sockDir, Args: args, LogPath: b.logPath,
		Rootfs: b.rel.Rootfs,
	})
	if c != nil {
		b.c = c
	}
	if err != nil {
		return fmt.Errorf("bird %s: %w", b.name, err)
	}
	// A stale socket from a killed BIRD stays until the new one binds:
	// wait for an answer, not for the file.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := b.client.Ping(ctx); err == nil {
			b.log.Debug("bird started", "container", b.id, "pid", c.Pid(), "recovery", recovery)
			return nil
		}
		select {
		case <-c.Done():
			return fmt.Errorf("bird %s: exited during start: %v; log %s: %s", b.name, c.Err(), b.logPath, tail(b.logPath, 8))
		case <-ctx.Done():
			return fmt.Errorf("bird %s: control socket %s did not answer: %w; log: %s", b.name, b.client.Socket, ctx.Err(), tail(b.logPath, 8))
		case <-tick.C:
		}
	}
}

// Running reports whether the container's BIRD is alive.
func (b *Instance) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c == nil {
		return false
	}
	select {
	case <-b.c.Done():
		return false
	default:
		return true
	}
}

// Pid is BIRD's host pid, 0 when not running.
func (b *Instance) Pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c == nil {
		return 0
	}
	return b.c.Pid()
}

// Container is the current container (nil before the first Start).
func (b *Instance) Container() Container {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.c
}

// Stop sends sig (syscall.SIGTERM: BIRD sends a Cease, peers withdraw at
// once; syscall.SIGKILL: no Cease, peers keep the routes as stale under
// graceful restart) and waits until BIRD has exited and its container is
// removed. Kernel routes stay either way (persist).
func (b *Instance) Stop(ctx context.Context, sig syscall.Signal) error {
	if six := b.pair(); six != nil && six.Running() {
		return errors.Join(b.stop(ctx, sig), six.stop(ctx, sig))
	}
	return b.stop(ctx, sig)
}

func (b *Instance) stop(ctx context.Context, sig syscall.Signal) error {
	if sig != syscall.SIGTERM && sig != syscall.SIGKILL {
		return fmt.Errorf("bird %s: stop with %v: only SIGTERM and SIGKILL are meaningful", b.name, sig)
	}
	b.mu.Lock()
	c := b.c
	b.mu.Unlock()
	if c == nil {
		return fmt.Errorf("bird %s: %w", b.name, ErrNotRunning)
	}
	select {
	case <-c.Done():
		return fmt.Errorf("bird %s: %w (exited: %v)", b.name, ErrNotRunning, c.Err())
	default:
	}
	if err := c.Signal(sig); err != nil {
		return fmt.Errorf("bird %s: %w", b.name, err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		return fmt.Errorf("bird %s: did not exit after %v: %w", b.name, sig, ctx.Err())
	}
	b.log.Debug("bird stopped", "signal", sig, "exit", c.Err())
	return b.remove(ctx)
}

// remove deletes the container (killing BIRD if it still runs).
func (b *Instance) remove(ctx context.Context) error {
	b.mu.Lock()
	c := b.c
	b.c = nil
	b.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Delete(ctx)
}

// Configure validates conf with `bird -p`, writes it and asks the running
// BIRD to reconfigure, then waits until the reconfiguration is done. A
// config BIRD rejects is never written, so the running config and the file
// stay as they were; the error wraps ErrInvalidConfig and quotes BIRD.
func (b *Instance) Configure(ctx context.Context, conf []byte) error {
	if six := b.pair(); six != nil {
		c4, c6, err := b.splitPair(conf)
		if err != nil {
			return err
		}
		if err := six.validate(c6); err != nil {
			return fmt.Errorf("bird %s: %w", six.name, err)
		}
		if err := b.configure(ctx, c4); err != nil {
			return err
		}
		return six.configure(ctx, c6)
	}
	return b.configure(ctx, conf)
}

func (b *Instance) configure(ctx context.Context, conf []byte) error {
	if !b.Running() {
		return fmt.Errorf("bird %s: configure: %w", b.name, ErrNotRunning)
	}
	old, _ := os.ReadFile(b.ConfigPath())
	if err := b.writeConfig(conf); err != nil {
		return err
	}
	r, err := b.client.Run(ctx, "configure")
	if err != nil {
		// BIRD parsed it differently from `bird -p`: put the old file back
		// so file and daemon agree.
		if old != nil {
			_ = os.WriteFile(b.ConfigPath(), old, 0o644)
		}
		return fmt.Errorf("bird %s: configure: %w", b.name, err)
	}
	switch r.Code {
	case 3, 19: // Reconfigured, Nothing to do
		return nil
	case 4, 5: // in progress, or queued behind one in progress
	default:
		return fmt.Errorf("bird %s: configure: unexpected reply %d %q", b.name, r.Code, strings.TrimSpace(r.Text()))
	}
	return b.waitReconfigured(ctx)
}

// waitReconfigured polls `show status` until BIRD no longer says
// "Reconfiguration in progress".
func (b *Instance) waitReconfigured(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := b.client.Run(ctx, "show status")
		if err == nil && !strings.Contains(r.Text(), "Reconfiguration in progress") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bird %s: reconfiguration still in progress: %w", b.name, ctx.Err())
		case <-tick.C:
		}
	}
}

// WaitEstablished polls until every named BGP protocol (all BGP protocols
// when none are named) is Established. The error lists the ones that are
// not, with their state and last error.
func (b *Instance) WaitEstablished(ctx context.Context, protocols ...string) error {
	if six := b.pair(); six != nil && len(protocols) == 0 {
		if err := b.waitEstablished(ctx); err != nil {
			return err
		}
		return six.waitEstablished(ctx)
	}
	return b.waitEstablished(ctx, protocols...)
}

// WaitRestartsDone polls until no graceful restart is in progress on
// this BIRD (and its bird6 on 1.x): neither its own recovery (it was
// started with -R and has not yet had every peer's End-of-RIB and its
// kernel scan) nor a neighbor's (it still holds a restarted neighbor's
// routes as stale). Until both end, BIRD is still rewriting kernel routes
// the restart touched: BIRD 1.6 rewrites a route as a delete and an add.
func (b *Instance) WaitRestartsDone(ctx context.Context) error {
	if err := b.waitRestartsDone(ctx); err != nil {
		return err
	}
	if six := b.pair(); six != nil {
		return six.waitRestartsDone(ctx)
	}
	return nil
}

func (b *Instance) waitRestartsDone(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		last, err := b.restartsInProgress(ctx)
		if err == nil && last == "" {
			return nil
		}
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bird %s: graceful restart still in progress: %s: %w", b.name, last, ctx.Err())
		case <-tick.C:
		}
		if !b.Running() {
			return fmt.Errorf("bird %s: %w while waiting for graceful restarts to end (%s)", b.name, ErrNotRunning, last)
		}
	}
}

// restartsInProgress names the graceful restarts in progress, "" for none.
func (b *Instance) restartsInProgress(ctx context.Context) (string, error) {
	var busy []string
	rec, err := b.client.InRecovery(ctx)
	if err != nil {
		return "", err
	}
	if rec {
		busy = append(busy, "own recovery (show status: Graceful restart recovery in progress)")
	}
	ps, err := b.client.Protocols(ctx)
	if err != nil {
		return "", err
	}
	for _, p := range ps {
		if p.NeighborRestarting {
			busy = append(busy, "neighbor "+p.Name+" restarting")
		}
	}
	return strings.Join(busy, "; "), nil
}

func (b *Instance) waitEstablished(ctx context.Context, protocols ...string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		ps, err := b.client.Protocols(ctx)
		if err == nil {
			pending := notEstablished(ps, protocols)
			if len(pending) == 0 {
				return nil
			}
			last = strings.Join(pending, "; ")
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bird %s: BGP sessions not Established: %s: %w", b.name, last, ctx.Err())
		case <-tick.C:
		}
		if !b.Running() {
			return fmt.Errorf("bird %s: %w while waiting for sessions (%s); log: %s", b.name, ErrNotRunning, last, tail(b.logPath, 5))
		}
	}
}

func notEstablished(ps []Protocol, want []string) []string {
	byName := map[string]Protocol{}
	for _, p := range ps {
		byName[p.Name] = p
	}
	if len(want) == 0 {
		for _, p := range ps {
			if p.Proto == "BGP" {
				want = append(want, p.Name)
			}
		}
	}
	var pending []string
	for _, n := range want {
		p, ok := byName[n]
		switch {
		case !ok:
			pending = append(pending, n+": no such protocol")
		case !p.Established():
			s := fmt.Sprintf("%s: %s %s", n, p.State, p.Info)
			if e := p.Details["Last error"]; e != "" {
				s += " (last error: " + e + ")"
			}
			pending = append(pending, s)
		}
	}
	sort.Strings(pending)
	return pending
}

// RSS is BIRD's resident set size in bytes (VmRSS); on 1.x bird's plus
// bird6's.
func (b *Instance) RSS() (int64, error) {
	n, err := b.rss()
	if six := b.pair(); six != nil && err == nil {
		var m int64
		m, err = six.rss()
		n += m
	}
	return n, err
}

func (b *Instance) rss() (int64, error) {
	pid := b.Pid()
	if pid == 0 {
		return 0, fmt.Errorf("bird %s: %w", b.name, ErrNotRunning)
	}
	n, err := procfs.RSS(pid)
	if err != nil {
		return 0, fmt.Errorf("bird %s: %w", b.name, err)
	}
	return n, nil
}

// StartAll starts the instances concurrently (with -R when recovery is
// set) and returns once each answers on its socket; errors are joined.
func StartAll(ctx context.Context, recovery bool, insts ...*Instance) error {
	errs := make([]error, len(insts))
	var wg sync.WaitGroup
	for i, b := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.startDaemons(ctx, recovery)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WaitAllEstablished waits until every instance has all its BGP sessions
// Established.
func WaitAllEstablished(ctx context.Context, insts ...*Instance) error {
	errs := make([]error, len(insts))
	var wg sync.WaitGroup
	for i, b := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.WaitEstablished(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
