package caliconode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/internal/machine"
	"github.com/birdcage/birdcage/internal/run"
)

// Services are the processes a calico node runs, each logging to
// <LogDir>/<service>.log.
var Services = []string{"felix", "bird", "bird6", "confd"}

// FelixHealthPort is Felix's health port (FELIX_HEALTHPORT's default).
const FelixHealthPort = 9099

// Options configure one node's calico/node container.
type Options struct {
	// Name is the node's name (NODENAME, the hostname, the container's
	// name after the run prefix).
	Name string
	// NetNSPath is the node's network namespace, which the container
	// shares.
	NetNSPath string
	// Machine stretches the waits for a stop.
	Machine machine.Profile
	// Log receives lifecycle events; nil means slog.Default().
	Log *slog.Logger
}

// Node is one node's calico/node pod across restarts and upgrades: a runc
// container sharing the node's network namespace, its root the source's
// directory (read-only, under an overlay whose writes are the pod's
// own), /var/run/calico, /var/lib/calico and /var/log/calico bound from
// directories that outlive the pod as the manifest's hostPath volumes do.
type Node struct {
	o      Options
	r      *run.Run
	id     string
	dir    string
	runDir string // /var/run/calico: bird.ctl, bird6.ctl
	libDir string // /var/lib/calico
	logDir string // /var/log/calico: one log per service
	log    *slog.Logger
	client *bird.Client

	mu     sync.Mutex
	src    Source
	env    []string
	c      *container
	root   string // the current start's overlay
	starts int
}

// New prepares the node's directories (registered with r) without
// starting anything.
func New(r *run.Run, o Options) (*Node, error) {
	if o.Name == "" || strings.ContainsAny(o.Name, "/ ") {
		return nil, fmt.Errorf("calico node name %q: want a non-empty name without / or spaces", o.Name)
	}
	n := &Node{o: o, r: r, id: r.Name("calico-" + o.Name), dir: r.Path("calico", o.Name), log: o.Log}
	if n.log == nil {
		n.log = slog.Default()
	}
	n.log = n.log.With("calico", o.Name)
	n.runDir = filepath.Join(n.dir, "run")
	n.libDir = filepath.Join(n.dir, "lib")
	n.logDir = filepath.Join(n.dir, "log")
	n.client = &bird.Client{Socket: filepath.Join(n.runDir, "bird.ctl")}
	if len(n.client.Socket) >= 108 {
		return nil, fmt.Errorf("calico node %q: BIRD's control socket path %s is too long for a unix socket: use a shorter name", o.Name, n.client.Socket)
	}
	if err := r.Guard("calico dir "+n.dir, func() error { return os.RemoveAll(n.dir) }); err != nil {
		return nil, err
	}
	for _, d := range []string{n.runDir, n.libDir, n.logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("calico node %q: %w", o.Name, err)
		}
	}
	r.Defer("calico container "+n.id, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), o.Machine.Wait(20*time.Second))
		defer cancel()
		return n.Stop(ctx, syscall.SIGKILL)
	})
	return n, nil
}

// Name is the node's name.
func (n *Node) Name() string { return n.o.Name }

// ContainerID is the container's id (it carries the run prefix).
func (n *Node) ContainerID() string { return n.id }

// BIRD is a client on the node's BIRD control socket
// (/var/run/calico/bird.ctl in the container).
func (n *Node) BIRD() *bird.Client { return n.client }

// LogDir holds felix.log, bird.log, bird6.log, confd.log and runc's
// container.log.
func (n *Node) LogDir() string { return n.logDir }

// Source is the source the node runs (or last ran).
func (n *Node) Source() Source {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.src
}

// Running says whether the container's init is running.
func (n *Node) Running() bool {
	n.mu.Lock()
	c := n.c
	n.mu.Unlock()
	if c == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// Start starts the pod from src with env (the datastore's environment,
// DATASTORE_TYPE and ETCD_ENDPOINTS, and whatever else the pod spec
// sets; nil keeps the last start's): a fresh overlay over src, so a fresh
// /etc/calico (the image's), and the persisted /var/run/calico and
// /var/lib/calico.
func (n *Node) Start(ctx context.Context, src Source, env []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c != nil {
		select {
		case <-n.c.done:
		default:
			return fmt.Errorf("calico node %s: already running (container %s)", n.o.Name, n.id)
		}
	}
	n.starts++
	root, err := n.rootfs(src, n.starts)
	if err != nil {
		return err
	}
	bundle := filepath.Join(n.dir, fmt.Sprintf("bundle-%d", n.starts))
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		return err
	}
	if env != nil {
		n.env = append([]string(nil), env...)
	}
	n.root = root
	cfg, err := json.MarshalIndent(n.spec(src, root), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), cfg, 0o644); err != nil {
		return fmt.Errorf("calico node %s: config.json: %w", n.o.Name, err)
	}
	c, err := runContainer(ctx, n.stateRoot(), bundle, n.id, filepath.Join(n.logDir, "container.log"))
	if err != nil {
		return fmt.Errorf("calico node %s: %w", n.o.Name, err)
	}
	n.c, n.src = c, src
	n.log.Info("calico node started", "source", src.Dir, "layout", src.Layout, "container", n.id)
	return nil
}

// Stop ends the pod: sig to its init (SIGKILL kills every process at
// once; SIGTERM stops each service with SIGTERM and waits for it), then
// SIGKILL when ctx ends first, the container deleted and its overlay
// unmounted. Stopping a stopped node is not an error.
func (n *Node) Stop(ctx context.Context, sig syscall.Signal) error {
	n.mu.Lock()
	c, root := n.c, n.root
	n.mu.Unlock()
	if c == nil {
		return nil
	}
	defer func() {
		if err := syscall.Unmount(root, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			n.log.Warn("unmount the pod's root", "path", root, "err", err)
		}
	}()
	select {
	case <-c.done:
	default:
		if err := c.signal(ctx, sig); err != nil {
			n.log.Warn("signal calico node", "sig", sig, "err", err)
		}
		select {
		case <-c.done:
		case <-ctx.Done():
			_ = c.signal(context.Background(), syscall.SIGKILL)
			select {
			case <-c.done:
			case <-time.After(n.o.Machine.Wait(10 * time.Second)):
				_ = c.cmd.Process.Kill()
				<-c.done
			}
		}
	}
	dctx, cancel := context.WithTimeout(context.Background(), n.o.Machine.Wait(10*time.Second))
	defer cancel()
	if out, err := exec.CommandContext(dctx, "runc", "--root", n.stateRoot(), "delete", "--force", n.id).CombinedOutput(); err != nil && !strings.Contains(string(out), "does not exist") {
		return fmt.Errorf("runc delete --force %s: %v: %s", n.id, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Exec runs argv inside the running pod and returns its combined output.
func (n *Node) Exec(ctx context.Context, argv ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, "runc", append([]string{"--root", n.stateRoot(), "exec", n.id}, argv...)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("calico node %s: runc exec %s: %w: %s", n.o.Name, strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Versions are the component versions as the pod's binaries report them.
type Versions struct {
	Calico string `json:"calico"` // `calico version` / `calico-node -v`
	BIRD   string `json:"bird"`   // `bird --version`
}

// Versions asks the running pod's binaries.
func (n *Node) Versions(ctx context.Context) (Versions, error) {
	var v Versions
	src := n.Source()
	out, err := n.Exec(ctx, src.command("version")...)
	if err != nil {
		return v, err
	}
	v.Calico = firstVersionLine(string(out))
	out, err = n.Exec(ctx, "bird", "--version")
	if err != nil {
		return v, err
	}
	v.BIRD = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "BIRD version"))
	return v, nil
}

// firstVersionLine picks Calico's version from buildinfo.PrintVersion's
// output ("Version:      v3.33.0-...").
func firstVersionLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && strings.EqualFold(strings.TrimSuffix(f[0], ":"), "version") {
			return f[1]
		}
	}
	return strings.TrimSpace(s)
}

// FelixReady asks Felix's health endpoint from inside the node's network
// namespace (what calico-node's -felix-ready does: GET
// http://localhost:9099/readiness).
func (n *Node) FelixReady(ctx context.Context) (bool, error) {
	var conn net.Conn
	err := ns.WithNetNSPath(n.o.NetNSPath, func(ns.NetNS) error {
		var d net.Dialer
		var err error
		conn, err = d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(FelixHealthPort)))
		return err
	})
	if err != nil {
		return false, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(conn, "GET /readiness HTTP/1.0\r\nHost: localhost\r\n\r\n"); err != nil {
		return false, err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return false, err
	}
	f := strings.Fields(line)
	return len(f) >= 2 && f[1] == "200", nil
}

func (n *Node) stateRoot() string { return n.r.Path("runc") }

// rootfs mounts a fresh overlay for one start: lower layers the shim
// (init, sv, and the links that give a userland-less source the host's
// shell) over src, upper a directory of this start's.
func (n *Node) rootfs(src Source, start int) (string, error) {
	base := filepath.Join(n.dir, fmt.Sprintf("root-%d", start))
	shim, upper, work, merged := filepath.Join(base, "shim"), filepath.Join(base, "upper"), filepath.Join(base, "work"), filepath.Join(base, "merged")
	if err := n.r.Guard("calico overlay "+merged, func() error {
		if err := syscall.Unmount(merged, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("unmount %s: %w", merged, err)
		}
		return os.RemoveAll(base)
	}); err != nil {
		return "", err
	}
	for _, d := range []string{shim, upper, work, merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	if err := writeShim(shim, src); err != nil {
		return "", fmt.Errorf("calico node %s: %w", n.o.Name, err)
	}
	opts := fmt.Sprintf("lowerdir=%s:%s,upperdir=%s,workdir=%s", shim, src.Dir, upper, work)
	if err := syscall.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		return "", fmt.Errorf("calico node %s: mount overlay %s (%s): %w", n.o.Name, merged, opts, err)
	}
	return merged, nil
}

// writeShim writes the layer above the source: /birdcage/init, sv, and
// for a source without a userland /bin/sh, the /lib links and Debian's
// /etc/alternatives that reach the host's (bound at /usr/local and
// /usr/lib by spec).
func writeShim(shim string, src Source) error {
	if err := os.MkdirAll(filepath.Join(shim, "birdcage/bin"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(shim, "birdcage/init"), []byte(initScript), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(shim, "birdcage/bin/sv"), []byte(svScript), 0o755); err != nil {
		return err
	}
	if src.Userland {
		return nil
	}
	links := map[string]string{"bin/sh": "/usr/local/bin/sh"}
	for _, l := range []string{"lib", "lib64"} {
		if !exists(filepath.Join(src.Dir, l)) {
			links[l] = "usr/" + l
		}
	}
	// Debian's alternatives (iptables -> /etc/alternatives/iptables ->
	// /usr/sbin/iptables-nft) name the host's /usr/sbin, which the pod
	// has at /usr/local/sbin.
	if alts, err := os.ReadDir("/etc/alternatives"); err == nil {
		for _, a := range alts {
			t, err := os.Readlink(filepath.Join("/etc/alternatives", a.Name()))
			if err != nil {
				continue
			}
			for _, d := range []string{"/usr/sbin/", "/usr/bin/"} {
				if rest, ok := strings.CutPrefix(t, d); ok && !strings.Contains(rest, "/") {
					links["etc/alternatives/"+a.Name()] = "/usr/local/" + strings.TrimPrefix(d, "/usr/") + rest
				}
			}
		}
	}
	for name, target := range links {
		p := filepath.Join(shim, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(target, p); err != nil {
			return err
		}
	}
	return nil
}

// capabilities: calico-node runs privileged; these are what Felix
// (iptables, ipsets, routes, sysctls, BPF maps), confd and BIRD use.
// Not CAP_SYS_RESOURCE: this machine kind's bounding set lacks it.
var capabilities = []string{
	"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_NET_BIND_SERVICE", "CAP_SYS_ADMIN",
	"CAP_IPC_LOCK", "CAP_BPF", "CAP_PERFMON", "CAP_KILL", "CAP_DAC_OVERRIDE", "CAP_CHOWN",
	"CAP_FOWNER", "CAP_SETUID", "CAP_SETGID", "CAP_SYS_PTRACE",
}

// spec is the pod's OCI config.
func (n *Node) spec(src Source, root string) *specs.Spec {
	// The image's PATH; the host's userland, bound at /usr/local for a
	// source without its own, comes after the image's directories, so
	// the host's own bird never shadows the image's.
	path := "PATH=/birdcage/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	if !src.Userland {
		path = "PATH=/birdcage/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/sbin:/usr/local/bin"
	}
	env := []string{
		path,
		"NODENAME=" + n.o.Name,
		"CALICO_FELIX=" + strings.Join(src.command("felix"), " "),
		"CALICO_CONFD=" + strings.Join(src.command("confd"), " "),
	}
	env = append(env, n.env...)
	caps := append([]string(nil), capabilities...)
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/run", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=755", "size=16m"}},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", "size=16m"}},
		// The manifest's hostPath volumes: they outlive the pod.
		{Destination: "/var/run/calico", Type: "bind", Source: n.runDir, Options: []string{"bind", "rw"}},
		{Destination: "/var/lib/calico", Type: "bind", Source: n.libDir, Options: []string{"bind", "rw"}},
		{Destination: "/var/log/calico", Type: "bind", Source: n.logDir, Options: []string{"bind", "rw"}},
	}
	if !src.Userland {
		// A source of Calico's files alone: the host's shell, iptables,
		// ipset and libraries, read-only, where the image has its own.
		for _, b := range [][2]string{{"/usr/bin", "/usr/local/bin"}, {"/usr/sbin", "/usr/local/sbin"}, {"/usr/lib", "/usr/lib"}, {"/usr/lib64", "/usr/lib64"}} {
			if _, err := os.Stat(b[0]); err != nil {
				continue
			}
			mounts = append(mounts, specs.Mount{Destination: b[1], Type: "bind", Source: b[0], Options: []string{"rbind", "ro", "nosuid", "nodev"}})
		}
	}
	return &specs.Spec{
		Version:  "1.0.2",
		Hostname: n.o.Name,
		Root:     &specs.Root{Path: root},
		Process: &specs.Process{
			Args: []string{"/birdcage/init"},
			Env:  env,
			Cwd:  "/",
			User: specs.User{UID: 0, GID: 0},
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
		},
		Mounts: mounts,
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.NetworkNamespace, Path: n.o.NetNSPath},
			},
			MaskedPaths: []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"},
		},
	}
}

// container is one `runc run` child.
type container struct {
	root, id string
	cmd      *exec.Cmd
	done     chan struct{}
	err      error
}

func (c *container) signal(ctx context.Context, sig syscall.Signal) error {
	out, err := exec.CommandContext(ctx, "runc", "--root", c.root, "kill", c.id, strconv.Itoa(int(sig))).CombinedOutput()
	if err != nil {
		select {
		case <-c.done:
			return nil
		default:
		}
		return fmt.Errorf("runc kill %s %s: %v: %s", c.id, sig, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// runContainer starts `runc run` in the foreground as a child and returns
// once the container's init runs.
func runContainer(ctx context.Context, root, bundle, id, logPath string) (*container, error) {
	if _, err := exec.LookPath("runc"); err != nil {
		return nil, fmt.Errorf("runc: %w (Debian package runc)", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	pidFile := filepath.Join(bundle, "pid")
	cmd := exec.Command("runc", "--root", root, "run", "--bundle", bundle, "--pid-file", pidFile, id)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start runc: %w", err)
	}
	c := &container{root: root, id: id, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(pidFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return c, nil
		}
		select {
		case <-c.done:
			b, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("container %s: runc exited before the container started: %v (log %s: %s)", id, c.err, logPath, lastLines(string(b), 5))
		case <-ctx.Done():
			_ = c.signal(context.Background(), syscall.SIGKILL)
			return nil, fmt.Errorf("container %s: waiting for start: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}

func lastLines(s string, k int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > k {
		lines = lines[len(lines)-k:]
	}
	return strings.Join(lines, " | ")
}
