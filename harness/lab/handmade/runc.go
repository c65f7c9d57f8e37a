package handmade

// The runc flavour's containers, made as a team's script makes them with
// `runc spec` and an editor: an OCI bundle per container on a shared
// read-only root (the host's /usr and /etc bound in), its own network
// namespace made by runc, `runc create` (the namespace exists, the init
// waits), the network plugged from the host, then `runc start`.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/birdcage/birdcage/dataplane/timing"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/run"
)

// runcLab makes the runc flavour's containers.
type runcLab struct {
	r *run.Run
	// root is runc's --root: the run's own, so a crashed run's containers
	// are found and removed by `birdcage clean` (internal/run).
	root    string
	bundles string
	rootfs  string
	// mounts bound at their own paths in node containers: the lab's
	// directory (read-write) and the programmer binary.
	labDir, prog string
	timing       timing.Model
}

// container is one created container.
type container struct {
	id  string
	pid int // its init's host PID
	// graceful: stop with `runc kill TERM` first (the node agent traps it).
	graceful bool
}

// nodeCapabilities: a kind node container is privileged; these are what
// the programmer and BIRD inside need (routes, sockets, port 179, raw
// sockets) and what its agent's shell uses.
var nodeCapabilities = []string{"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_NET_BIND_SERVICE", "CAP_KILL",
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_SETUID", "CAP_SETGID"}

func newRuncLab(r *run.Run, labDir, prog string, timing timing.Model) (*runcLab, error) {
	if _, err := exec.LookPath("runc"); err != nil {
		return nil, fmt.Errorf("handmade lab, runc flavour: %w (Debian package runc)", err)
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		return nil, fmt.Errorf("handmade lab, runc flavour: %w (Debian package util-linux)", err)
	}
	d, err := r.TempDir("lab-runc")
	if err != nil {
		return nil, err
	}
	rc := &runcLab{r: r, root: r.Path("runc"), bundles: filepath.Join(d, "bundles"), rootfs: filepath.Join(d, "rootfs"), labDir: labDir, prog: prog, timing: timing}
	// The skeleton root: mount points only, the merged-/usr links.
	for _, p := range []string{"usr", "etc", "proc", "dev", "sys", "run", "tmp", "var", strings.TrimPrefix(labDir, "/"), strings.TrimPrefix(filepath.Dir(prog), "/")} {
		if err := os.MkdirAll(filepath.Join(rc.rootfs, p), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(rc.rootfs, prog), nil, 0o644); err != nil {
		return nil, err
	}
	for _, l := range [][2]string{{"lib", "usr/lib"}, {"lib64", "usr/lib64"}, {"bin", "usr/bin"}, {"sbin", "usr/sbin"}} {
		if err := os.Symlink(l[1], filepath.Join(rc.rootfs, l[0])); err != nil {
			return nil, err
		}
	}
	return rc, nil
}

// process is a container's main process and what else it needs.
type process struct {
	args, env []string
	caps      []string
	// binds are host paths bound at the same path (rw: the first).
	binds    []string
	graceful bool
}

// nodeProcess is a node container's init: the node agent, running the
// programmer and BIRD inside the container.
func (rc *runcLab) nodeProcess(labDir, node, prog string) process {
	nd := filepath.Join(labDir, "nodes", node)
	return process{
		args: []string{"bash", filepath.Join(labDir, "agent.sh"), nd, node, filepath.Join(labDir, "datastore"), prog},
		env: []string{env.Set(env.ProgrammerStartupDelay, rc.timing.ProgrammerStartupDelay.String()),
			env.Set(env.ProgrammerResyncDelayPerRoute, rc.timing.ProgrammerResyncPerRoute.String())},
		caps: nodeCapabilities, binds: []string{labDir, prog}, graceful: true,
	}
}

// podProcess is a workload "pod": a pause process holding its namespace.
func podProcess() process { return process{args: []string{"sleep", "infinity"}} }

// spec is the OCI config of a container.
func (rc *runcLab) spec(hostname string, p process) *specs.Spec {
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/usr", Type: "bind", Source: "/usr", Options: []string{"rbind", "ro", "nosuid", "nodev"}},
		{Destination: "/etc", Type: "bind", Source: "/etc", Options: []string{"rbind", "ro", "nosuid", "nodev"}},
		{Destination: "/run", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=755", "size=16m"}},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", "size=16m"}},
	}
	for i, b := range p.binds {
		mode := "ro"
		if i == 0 {
			mode = "rw"
		}
		mounts = append(mounts, specs.Mount{Destination: b, Type: "bind", Source: b, Options: []string{"bind", mode, "nosuid", "nodev"}})
	}
	caps := append([]string(nil), p.caps...)
	return &specs.Spec{
		Version:  specs.Version,
		Hostname: hostname,
		Root:     &specs.Root{Path: rc.rootfs, Readonly: true},
		Process: &specs.Process{
			Args: p.args,
			Env:  append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, p.env...),
			Cwd:  "/",
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
			NoNewPrivileges: true,
		},
		Mounts: mounts,
		Linux: &specs.Linux{
			// A network namespace of its own: made by runc, not named.
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace},
			},
			MaskedPaths:   []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
}

// runc runs one runc command on the lab's state root.
func (rc *runcLab) runc(ctx context.Context, args ...string) ([]byte, error) {
	argv := append([]string{"--root", rc.root}, args...)
	out, err := exec.CommandContext(ctx, "runc", argv...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("runc %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// create writes the bundle and runs `runc create`: the container's
// namespaces exist, its init waits for start. Its removal is registered.
func (rc *runcLab) create(ctx context.Context, what, hostname string, p process) (*container, error) {
	c := &container{id: rc.r.Name(what), graceful: p.graceful}
	bundle := filepath.Join(rc.bundles, c.id)
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		return nil, err
	}
	cfg, err := json.MarshalIndent(rc.spec(hostname, p), "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), cfg, 0o644); err != nil {
		return nil, err
	}
	// The init's stdio: a file (a pipe would keep `runc create` waiting
	// on the container).
	logf, err := os.Create(filepath.Join(bundle, "init.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	pidFile := filepath.Join(bundle, "pid")
	err = rc.r.Guard("lab container "+c.id, func() error { return rc.remove(c) })
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "runc", "--root", rc.root, "create", "--bundle", bundle, "--pid-file", pidFile, c.id)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("handmade lab: runc create %s: %w: %s", c.id, err, strings.TrimSpace(string(b)))
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return nil, fmt.Errorf("handmade lab: container %s: %w", c.id, err)
	}
	if c.pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || c.pid <= 0 {
		return nil, fmt.Errorf("handmade lab: container %s: pid file says %q", c.id, b)
	}
	return c, nil
}

// start runs the container's init.
func (rc *runcLab) start(ctx context.Context, c *container) error {
	_, err := rc.runc(ctx, "start", c.id)
	return err
}

// state is what `runc state` says of a container ("" once it is gone).
func (rc *runcLab) state(ctx context.Context, id string) string {
	out, err := rc.runc(ctx, "state", id)
	if err != nil {
		return ""
	}
	var st struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(out, &st) != nil {
		return ""
	}
	return st.Status
}

// remove stops a container as `docker stop` does — `runc kill TERM` to a
// node (its agent stops BIRD and the programmer and exits), then, after at
// most 10 s, whatever is left — and deletes it.
func (rc *runcLab) remove(c *container) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c.graceful && rc.state(ctx, c.id) == "running" {
		if _, err := rc.runc(ctx, "kill", c.id, "TERM"); err == nil {
			stop, cancelStop := context.WithTimeout(ctx, 10*time.Second)
			tick := time.NewTicker(20 * time.Millisecond)
		wait:
			for rc.state(stop, c.id) == "running" {
				select {
				case <-stop.Done():
					break wait
				case <-tick.C:
				}
			}
			tick.Stop()
			cancelStop()
		}
	}
	if out, err := rc.runc(ctx, "delete", "--force", c.id); err != nil && !strings.Contains(string(out), "does not exist") {
		return err
	}
	return os.RemoveAll(filepath.Join(rc.bundles, c.id))
}
