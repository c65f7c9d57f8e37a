package bird

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/birdcage/birdcage/internal/machine"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Runc runs containers with Debian's runc as foreground `runc run` child
// processes: the child reaps BIRD and deletes the container's state when
// BIRD exits, and `runc delete --force` cleans up if the child itself died.
type Runc struct {
	// Binary is the runc executable; empty means "runc" on PATH.
	Binary string
	// StateRoot is runc's --root, one per birdcage run so `runc list`
	// shows only that run's containers.
	StateRoot string
	// BundleRoot holds one bundle dir per container and the shared
	// read-only skeleton root filesystem.
	BundleRoot string
	// Machine stretches the wait for `runc kill` (10 s at native speed).
	Machine machine.Profile

	skelOnce sync.Once
	skelErr  error
}

// Capabilities are all BIRD needs: routes and sockets (NET_ADMIN), port 179
// (NET_BIND_SERVICE), raw sockets for BFD/OSPF and SO_BINDTODEVICE (NET_RAW).
var Capabilities = []string{"CAP_NET_ADMIN", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW"}

// Name implements Runtime.
func (r *Runc) Name() string { return "runc" }

func (r *Runc) bin() string {
	if r.Binary != "" {
		return r.Binary
	}
	return "runc"
}

func (r *Runc) cmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, r.bin(), append([]string{"--root", r.StateRoot}, args...)...)
}

// skeleton makes the read-only root: empty mount points and the merged-/usr
// symlinks; /usr and /etc are bound over it from the host.
func (r *Runc) skeleton() (string, error) {
	root := filepath.Join(r.BundleRoot, "rootfs")
	r.skelOnce.Do(func() {
		for _, d := range []string{"usr", "etc", "proc", "dev", "sys", "run", "tmp", "var"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				r.skelErr = fmt.Errorf("container skeleton: %w", err)
				return
			}
		}
		for _, l := range [][2]string{{"lib", "usr/lib"}, {"lib64", "usr/lib64"}, {"bin", "usr/bin"}, {"sbin", "usr/sbin"}} {
			p := filepath.Join(root, l[0])
			if err := os.Symlink(l[1], p); err != nil && !errors.Is(err, os.ErrExist) {
				r.skelErr = fmt.Errorf("container skeleton: %w", err)
				return
			}
		}
	})
	return root, r.skelErr
}

// Spec builds the OCI config for a BIRD container.
func (r *Runc) Spec(s ContainerSpec, rootfs string) *specs.Spec {
	caps := append([]string(nil), Capabilities...)
	spec := &specs.Spec{
		Version:  "1.0.2", // what Debian's runc 1.1.5 reports
		Hostname: s.Hostname,
		Root:     &specs.Root{Path: rootfs, Readonly: true},
		Process: &specs.Process{
			Args: s.Args,
			Env:  []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
			Cwd:  "/",
			User: specs.User{UID: 0, GID: 0},
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
			NoNewPrivileges: true,
			Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 4096, Soft: 4096}},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/usr", Type: "bind", Source: "/usr", Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			{Destination: "/etc", Type: "bind", Source: "/etc", Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			{Destination: "/etc/bird", Type: "bind", Source: s.ConfigDir, Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}},
			// /run is a private tmpfs; /run/bird on top of it must stay the
			// host bind, so the order of these two matters.
			{Destination: "/run", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=755", "size=16m"}},
			{Destination: "/run/bird", Type: "bind", Source: s.SocketDir, Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", "size=16m"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.NetworkNamespace, Path: s.NetNSPath},
			},
			MaskedPaths: []string{
				"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
				"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
			},
			ReadonlyPaths: []string{
				"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
			},
		},
	}
	if s.Rootfs != "" {
		spec.Mounts = releaseMounts(spec.Mounts)
	}
	return spec
}

// Run implements Runtime: it writes the bundle and starts `runc run` in the
// foreground as a child, its stdio appended to spec.LogPath.
func (r *Runc) Run(ctx context.Context, s ContainerSpec) (Container, error) {
	if _, err := exec.LookPath(r.bin()); err != nil {
		return nil, fmt.Errorf("runc: %w (Debian package runc)", err)
	}
	for _, p := range []string{s.ConfigDir, s.SocketDir} {
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("container %s: bind source %s: not a directory", s.ID, p)
		}
	}
	if _, err := os.Stat(s.NetNSPath); err != nil {
		return nil, fmt.Errorf("container %s: network namespace: %w", s.ID, err)
	}
	if err := os.MkdirAll(r.StateRoot, 0o700); err != nil {
		return nil, fmt.Errorf("runc state root: %w", err)
	}
	rootfs := s.Rootfs
	if rootfs == "" {
		var err error
		if rootfs, err = r.skeleton(); err != nil {
			return nil, err
		}
	}
	bundle := filepath.Join(r.BundleRoot, s.ID)
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		return nil, fmt.Errorf("container %s: bundle: %w", s.ID, err)
	}
	cfg, err := json.MarshalIndent(r.Spec(s, rootfs), "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), cfg, 0o644); err != nil {
		return nil, fmt.Errorf("container %s: config.json: %w", s.ID, err)
	}
	pidFile := filepath.Join(bundle, "pid")
	_ = os.Remove(pidFile)

	logf, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("container %s: log: %w", s.ID, err)
	}
	// Not CommandContext: the container must outlive the start context.
	cmd := exec.Command(r.bin(), "--root", r.StateRoot, "run", "--bundle", bundle, "--pid-file", pidFile, s.ID)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: a Ctrl-C to the test binary reaches the harness's
	// cleanup, not runc (which would forward it to BIRD as a SIGINT).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("container %s: start runc: %w", s.ID, err)
	}
	c := &runcContainer{rt: r, id: s.ID, cmd: cmd, done: make(chan struct{}), logPath: s.LogPath}
	go func() {
		c.err = cmd.Wait()
		logf.Close()
		close(c.done)
	}()

	// The pid file appears once the container's process runs.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				c.pid = pid
				return c, nil
			}
		}
		select {
		case <-c.done:
			return c, fmt.Errorf("container %s: runc exited before the container started: %v (log %s: %s)", s.ID, c.err, s.LogPath, tail(s.LogPath, 5))
		case <-ctx.Done():
			_ = c.Delete(context.Background())
			return c, fmt.Errorf("container %s: waiting for start: %w", s.ID, ctx.Err())
		case <-tick.C:
		}
	}
}

type runcContainer struct {
	rt      *Runc
	id      string
	cmd     *exec.Cmd
	pid     int
	done    chan struct{}
	err     error
	logPath string
}

func (c *runcContainer) ID() string            { return c.id }
func (c *runcContainer) Pid() int              { return c.pid }
func (c *runcContainer) Done() <-chan struct{} { return c.done }
func (c *runcContainer) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Signal goes through `runc kill`, which signals the container's init
// (BIRD) itself; SIGKILL cannot be forwarded by the runc child.
func (c *runcContainer) Signal(sig syscall.Signal) error {
	select {
	case <-c.done:
		return fmt.Errorf("container %s: already exited", c.id)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.rt.Machine.Wait(10*time.Second))
	defer cancel()
	out, err := c.rt.cmd(ctx, "kill", c.id, strconv.Itoa(int(sig))).CombinedOutput()
	if err != nil {
		select {
		case <-c.done: // exited meanwhile
			return nil
		default:
		}
		return fmt.Errorf("runc kill %s %s: %v: %s", c.id, sig, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (c *runcContainer) Exec(ctx context.Context, args ...string) ([]byte, error) {
	out, err := c.rt.cmd(ctx, append([]string{"exec", c.id}, args...)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("runc exec %s %s: %w: %s", c.id, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Delete kills the container if needed, waits for the runc child, and
// force-deletes the state (needed when the runc child itself was killed).
func (c *runcContainer) Delete(ctx context.Context) error {
	select {
	case <-c.done:
	default:
		_ = c.Signal(syscall.SIGKILL)
		select {
		case <-c.done:
		case <-ctx.Done():
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	out, err := c.rt.cmd(ctx, "delete", "--force", c.id).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "does not exist") {
		return fmt.Errorf("runc delete --force %s: %v: %s", c.id, err, strings.TrimSpace(string(out)))
	}
	_ = os.RemoveAll(filepath.Join(c.rt.BundleRoot, c.id))
	return nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
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
