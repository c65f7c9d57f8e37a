// Package runc runs one OCI bundle as a foreground `runc run` child: the
// child reaps the container's init and deletes its state when the init
// exits, and `runc delete --force` cleans up when the child itself died.
// BIRD's containers (dataplane/bird) and the calico/node pod
// (dataplane/caliconode) both run this way.
package runc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Child is one container's `runc run` process.
type Child struct {
	bin, root, id, logPath string
	cmd                    *exec.Cmd
	pid                    int
	done                   chan struct{}
	err                    error
}

// Start runs the bundle (its config.json written) as container id under
// runc state root root with runc binary bin ("" is runc on PATH), stdio
// appended to logPath, and returns once the container's init runs. The
// child has a process group of its own, so a Ctrl-C to the harness reaches
// the harness's cleanup, not runc (which would forward it to the init).
// When ctx ends first the container is killed and deleted.
func Start(ctx context.Context, bin, root, bundle, id, logPath string) (*Child, error) {
	if bin == "" {
		bin = "runc"
	}
	if _, err := exec.LookPath(bin); err != nil {
		return nil, fmt.Errorf("runc: %w (Debian package runc)", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("runc state root: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("container %s: log: %w", id, err)
	}
	pidFile := filepath.Join(bundle, "pid")
	_ = os.Remove(pidFile)
	// Not CommandContext: the container must outlive the start context.
	cmd := exec.Command(bin, "--root", root, "run", "--bundle", bundle, "--pid-file", pidFile, id)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("container %s: start runc: %w", id, err)
	}
	c := &Child{bin: bin, root: root, id: id, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	// The pid file appears once the container's init runs.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				c.pid = pid
				return c, nil
			}
		}
		select {
		case <-c.done:
			return nil, fmt.Errorf("container %s: runc exited before the container started: %v (log %s: %s)", id, c.err, logPath, Tail(logPath, 5))
		case <-ctx.Done():
			_ = c.Delete(context.Background(), 0)
			return nil, fmt.Errorf("container %s: waiting for start: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}

func (c *Child) command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, c.bin, append([]string{"--root", c.root}, args...)...)
}

// ID is the container's id, Pid its init's process id (in the host's PID
// namespace).
func (c *Child) ID() string { return c.id }
func (c *Child) Pid() int   { return c.pid }

// Done is closed when the runc child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err is how the runc child exited, nil while it runs.
func (c *Child) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Exited reports whether the runc child has exited.
func (c *Child) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the container's init through `runc kill` (SIGKILL
// cannot be forwarded by the runc child). A container that exited
// meanwhile is not an error.
func (c *Child) Signal(ctx context.Context, sig syscall.Signal) error {
	if c.Exited() {
		return fmt.Errorf("container %s: already exited", c.id)
	}
	out, err := c.command(ctx, "kill", c.id, strconv.Itoa(int(sig))).CombinedOutput()
	if err != nil && !c.Exited() {
		return fmt.Errorf("runc kill %s %s: %v: %s", c.id, sig, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Exec runs args inside the container and returns the combined output.
func (c *Child) Exec(ctx context.Context, args ...string) ([]byte, error) {
	out, err := c.command(ctx, append([]string{"exec", c.id}, args...)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("runc exec %s %s: %w: %s", c.id, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Delete ends the container if it still runs — SIGKILL to its init, and the
// runc child itself killed if the init has not gone within grace (0: when
// ctx ends) — then force-deletes runc's state for it.
func (c *Child) Delete(ctx context.Context, grace time.Duration) error {
	if !c.Exited() {
		_ = c.Signal(ctx, syscall.SIGKILL)
		var late <-chan time.Time
		if grace > 0 {
			t := time.NewTimer(grace)
			defer t.Stop()
			late = t.C
		}
		select {
		case <-c.done:
		case <-ctx.Done():
			c.killChild()
		case <-late:
			c.killChild()
		}
	}
	dctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
	}
	out, err := c.command(dctx, "delete", "--force", c.id).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "does not exist") {
		return fmt.Errorf("runc delete --force %s: %v: %s", c.id, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// killChild kills the runc child process itself (not the container) and
// waits for it.
func (c *Child) killChild() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// KillRunc kills the runc child process and not the container's init: a
// test's way to play a runc that died.
func (c *Child) KillRunc() error { return c.cmd.Process.Signal(syscall.SIGKILL) }

// Tail is the last n lines of a file, joined for an error message.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
