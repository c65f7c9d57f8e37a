// Package run owns the identity of one birdcage run and the resources it
// creates. Every network namespace, process, container and temp dir a run makes
// carries the run's prefix and is registered here the moment it exists, so it
// is removed on success, failure, panic and Ctrl-C, and so `birdcage clean` can
// find what a killed run left behind.
//
// It must not know what the resources are for (topologies, BIRD, probes).
package run

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
)

// StateRoot is where each run keeps its sockets, configs, pid files and the
// owner record `clean` reads. (/run is tmpfs on most systems, so a reboot
// cleans it too; where it is not, `birdcage clean` does.)
const StateRoot = "/run/birdcage"

// prefixPattern matches the prefix of every namespace a run creates: "bc" and
// six hex digits, then a dash. Short, because it ends up in netns names and in
// unix socket paths (108 bytes at most).
var prefixPattern = regexp.MustCompile(`^bc([0-9a-f]{6})-`)

// Run is one run's identity and cleanup stack.
type Run struct {
	ID     string // six hex digits
	Prefix string // "bc" + ID + "-"
	Dir    string // StateRoot/ID

	mu        sync.Mutex
	cleanups  []cleanup
	closeDone chan struct{} // non-nil once Close started; closed when it finished
	closed    bool          // Close has run every cleanup: a later one runs at once
	removeDir func() error  // the run dir goes last, after every late cleanup
	stopSig   func()
}

// ErrClosed is Guard's answer once the run is closing: nothing new may be
// created for it.
var ErrClosed = errors.New("run closed")

type cleanup struct {
	what string
	fn   func() error
	// local: the resource lives only in this process (a goroutine, a
	// socket, a BPF link held by an fd); Keep still runs it.
	local bool
}

// New starts a run: it picks an unused ID, creates the state dir and records
// the owning process so `clean` can tell a live run from a killed one.
func New() (*Run, error) {
	for range 16 {
		var b [3]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("run id: %w", err)
		}
		id := hex.EncodeToString(b[:])
		dir := filepath.Join(StateRoot, id)
		if err := os.MkdirAll(StateRoot, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", StateRoot, err)
		}
		if err := os.Mkdir(dir, 0o755); errors.Is(err, os.ErrExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("create run dir: %w", err)
		}
		r := &Run{ID: id, Prefix: "bc" + id + "-", Dir: dir}
		if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("record run owner: %w", err)
		}
		r.removeDir = func() error { return os.RemoveAll(dir) }
		return r, nil
	}
	return nil, errors.New("run id: no free id after 16 tries")
}

// Name returns a resource name carrying the run's prefix.
func (r *Run) Name(s string) string { return r.Prefix + s }

// Path returns a path inside the run's state dir.
func (r *Run) Path(elem ...string) string {
	return filepath.Join(append([]string{r.Dir}, elem...)...)
}

// Defer registers a cleanup for a resource that exists. Cleanups run
// last-in first-out in Close. One registered while Close is under way (a
// signal arrived as something was being made) is run by that Close before it
// returns; one registered after Close has finished runs at once, so a
// resource can never outlive its run unnoticed.
func (r *Run) Defer(what string, fn func() error) {
	r.mu.Lock()
	if !r.closed {
		r.cleanups = append(r.cleanups, cleanup{what: what, fn: fn})
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	if err := fn(); err != nil {
		slog.Warn("cleanup failed", "what", what, "err", err)
	}
}

// DeferLocal is Defer for a resource that lives only in this process (a
// goroutine watching the run, a socket it reads, a BPF link its fd holds):
// Close runs it like any other, and Keep runs it too, since a kept run is
// left to outlive this process and nothing here will serve it.
func (r *Run) DeferLocal(what string, fn func() error) {
	r.mu.Lock()
	if !r.closed {
		r.cleanups = append(r.cleanups, cleanup{what: what, fn: fn, local: true})
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	if err := fn(); err != nil {
		slog.Warn("cleanup failed", "what", what, "err", err)
	}
}

// Guard registers a cleanup for a resource about to be created, and says
// whether to go ahead: once Close has started it registers nothing and
// returns ErrClosed, so nothing new is made for a run on its way out.
func (r *Run) Guard(what string, fn func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closeDone != nil {
		return fmt.Errorf("%s: %w", what, ErrClosed)
	}
	r.cleanups = append(r.cleanups, cleanup{what: what, fn: fn})
	return nil
}

// Close runs every registered cleanup, newest first, and returns all their
// errors joined. It is safe to call more than once and from several
// goroutines; every call returns only once the cleanups have run.
func (r *Run) Close() error {
	r.mu.Lock()
	if r.closeDone != nil {
		// Another Close (say, the signal handler's) is under way: wait for
		// it, so a caller that returns after Close knows nothing is left.
		done := r.closeDone
		r.mu.Unlock()
		<-done
		return nil
	}
	r.closeDone = make(chan struct{})
	defer close(r.closeDone)
	stop := r.stopSig
	var errs []error
	// Cleanups registered while these run (by code still making things in
	// another goroutine) are run too, until none are left.
	for len(r.cleanups) > 0 {
		cs := r.cleanups
		r.cleanups = nil
		r.mu.Unlock()
		for i := len(cs) - 1; i >= 0; i-- {
			if err := cs[i].fn(); err != nil {
				slog.Warn("cleanup failed", "what", cs[i].what, "err", err)
				errs = append(errs, fmt.Errorf("cleanup %s: %w", cs[i].what, err))
			}
		}
		r.mu.Lock()
	}
	if r.removeDir != nil {
		if err := r.removeDir(); err != nil {
			errs = append(errs, fmt.Errorf("cleanup run dir %s: %w", r.Dir, err))
		}
		r.removeDir = nil
	}
	r.closed = true
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
	return errors.Join(errs...)
}

// CloseOnSignal makes SIGINT and SIGTERM close the run and then exit the
// process with 130/143, so Ctrl-C during a build leaves nothing behind.
func (r *Run) CloseOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	r.mu.Lock()
	r.stopSig = func() { signal.Stop(ch); close(done) }
	r.mu.Unlock()
	go func() {
		select {
		case sig := <-ch:
			slog.Warn("signal: cleaning up run", "run", r.ID, "signal", sig)
			_ = r.Close()
			code := 130
			if sig == syscall.SIGTERM {
				code = 143
			}
			os.Exit(code)
		case <-done:
		}
	}()
}

// Keep leaves everything the run made in place when the process exits, for
// `birdcage up --keep` and a failed spec kept for debugging; `birdcage
// down` (Clean with Force) removes it. A kept run counts as alive, so
// `clean` leaves it alone. What lives only in this process (DeferLocal) is
// stopped now, newest first; its errors are returned joined.
func (r *Run) Keep() error {
	if err := os.WriteFile(r.Path("kept"), nil, 0o644); err != nil {
		return fmt.Errorf("keep run %s: %w", r.ID, err)
	}
	r.mu.Lock()
	cs := r.cleanups
	r.cleanups, r.removeDir = nil, nil
	r.mu.Unlock()
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		if !cs[i].local {
			continue
		}
		if err := cs[i].fn(); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", cs[i].what, err))
		}
	}
	return errors.Join(errs...)
}

// IDOf returns the run ID a resource name carries, if any.
func IDOf(name string) (string, bool) {
	m := prefixPattern.FindStringSubmatch(name)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Alive reports whether the run with this ID still has a live owner process.
// A run without an owner record (its dir already gone) counts as dead.
func Alive(id string) bool {
	if _, err := os.Stat(filepath.Join(StateRoot, id, "kept")); err == nil {
		return true
	}
	b, err := os.ReadFile(filepath.Join(StateRoot, id, "owner.pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil || pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}
