// If the foreground runc child itself dies, BIRD keeps running in its
// container; the run's cleanup must still remove it (runc delete --force)
// and leave no process behind.
package bird

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/nsutil"
	"github.com/birdcage/birdcage/internal/run"
)

func TestCleanupAfterRuncDied(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and a runc container")
	}
	for _, b := range []string{"bird", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("needs %s (Debian packages bird2 and runc)", b)
		}
	}
	r, err := run.New()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	name := r.Name("n1")
	n, err := nsutil.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	r.Defer("netns "+name, func() error { n.Close(); return nsutil.Delete(name) })
	b, err := New(r, Options{Name: "n1", NetNS: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteConfig([]byte("router id 10.0.0.1;\nprotocol device {}\n")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid := b.Pid()
	rc := b.Container().(*runcContainer)
	// 1. Kill the runc child, not BIRD.
	if err := rc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-rc.Done()
	if err := b.Client().Ping(ctx); err != nil {
		t.Fatalf("guard: BIRD should outlive its runc child: %v", err)
	}
	// 2. The run's cleanup removes the orphaned container.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
		if err != nil || zombie(st) {
			break // gone (or a zombie waiting for a slow reaper)
		}
		if time.Now().After(deadline) {
			t.Fatalf("bird pid %d still running after the run's cleanup", pid)
		}
		<-time.After(20 * time.Millisecond) // poll interval while watching the process
	}
	// Asking runc would recreate its --root; look at its state dir instead.
	if _, err := os.Stat(r.Path("runc", b.ContainerID())); err == nil {
		t.Fatalf("runc state for %s survived the cleanup", b.ContainerID())
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// zombie reports whether a /proc/<pid>/stat line is in state Z.
func zombie(stat []byte) bool {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}
