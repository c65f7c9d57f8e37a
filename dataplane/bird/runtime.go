package bird

import (
	"context"
	"syscall"
)

// Runtime starts BIRD containers. The default is Runc (Debian's runc, one
// foreground `runc run` child per container); a Docker or containerd
// runtime can serve labs behind the same interface.
type Runtime interface {
	// Name is the runtime's name for messages ("runc").
	Name() string
	// Run starts a container and returns once its main process exists.
	// The container is registered for removal by the caller.
	Run(ctx context.Context, spec ContainerSpec) (Container, error)
}

// ContainerSpec is what a BIRD container needs, independent of runtime.
type ContainerSpec struct {
	// ID is unique on the host and carries the run prefix.
	ID string
	// Hostname inside the container (the node name).
	Hostname string
	// NetNSPath is the network namespace to join (/var/run/netns/<name>).
	NetNSPath string
	// ConfigDir is the host dir bound read-only at /etc/bird.
	ConfigDir string
	// SocketDir is the host dir bound read-write at /run/bird, where BIRD
	// puts its control socket so the host can reach it.
	SocketDir string
	// Args is the main process's argv (bird ...).
	Args []string
	// LogPath is the host file the process's stdout and stderr append to.
	LogPath string
	// Rootfs is a BIRD release's root filesystem (ci/bird-releases), used
	// read-only as the container's root in place of the skeleton with the
	// host's /usr and /etc; empty means the host's BIRD.
	Rootfs string
}

// Container is one running (or exited) container.
type Container interface {
	ID() string
	// Pid is the host pid of the container's main process.
	Pid() int
	// Signal sends sig to the main process.
	Signal(sig syscall.Signal) error
	// Done is closed once the main process has exited and been reaped.
	Done() <-chan struct{}
	// Err is the main process's exit error after Done (nil for exit 0).
	Err() error
	// Exec runs a command inside the container's namespaces and returns
	// its combined output.
	Exec(ctx context.Context, args ...string) ([]byte, error)
	// Delete removes the container, killing it first if it is still
	// running; deleting a removed container is not an error.
	Delete(ctx context.Context) error
}
