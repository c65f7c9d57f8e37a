package caliconode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/poll"
	"github.com/birdcage/birdcage/internal/testenv"
)

// calicoDir is $BIRDCAGE_CALICO, or the test skips naming the feature.
func calicoDir(t *testing.T) string {
	t.Helper()
	testenv.NeedRoot(t)
	dir := testenv.Env().Calico
	if dir == "" {
		testenv.Missing(t, testenv.Calico, "set "+env.Calico+"=DIR, a directory laid out like the calico/node image's root filesystem")
	}
	return dir
}

// TestPodRunsTheImagesServices starts one node's pod from the image and
// holds what the harness relies on: every service runs under the
// image's argv, logs where the artifacts take them from, the binaries
// report their versions (the image's BIRD, not the host's), and a stop
// leaves no process or mount behind.
func TestPodRunsTheImagesServices(t *testing.T) {
	src, err := OpenSource(calicoDir(t))
	if err != nil {
		t.Fatal(err)
	}
	r := testenv.NewRun(t)
	netns := testenv.NetNSIn(t, r, "podnode")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := New(r, Options{Name: "node-1", NetNSPath: "/var/run/netns/" + netns.Name})
	if err != nil {
		t.Fatal(err)
	}
	// Guard: nothing runs before Start.
	if n.Running() {
		t.Fatal("pod running before Start")
	}
	if err := n.Start(ctx, src, []string{"DATASTORE_TYPE=etcdv3", "ETCD_ENDPOINTS=http://127.0.0.1:2379"}); err != nil {
		t.Fatal(err)
	}
	// Every service has started (its log says so) under the image's argv.
	for _, svc := range Services {
		p := filepath.Join(n.LogDir(), svc+".log")
		if err := poll.Until(ctx, 20*time.Millisecond, func() bool {
			b, _ := os.ReadFile(p)
			return strings.Contains(string(b), "birdcage-runit: starting "+svc)
		}); err != nil {
			t.Fatalf("%s never started (log %s): %v", svc, p, err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(n.LogDir(), "felix.log"))
	if want := strings.Join(src.command("felix"), " "); !strings.Contains(string(b), want) {
		t.Errorf("felix was not started as %q; its log:\n%s", want, b)
	}
	v, err := n.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.Calico == "" || !strings.Contains(v.BIRD, "1.6") {
		t.Errorf("versions %+v: want Calico's version and BIRD 1.6.x (the fork)", v)
	}
	t.Logf("versions: %+v", v)
	mounts := func() int {
		b, _ := os.ReadFile("/proc/self/mountinfo")
		return strings.Count(string(b), r.Path("calico"))
	}
	if mounts() == 0 {
		t.Fatal("no overlay mounted for the pod (the check below would pass vacuously)")
	}
	if err := n.Stop(ctx, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if n.Running() {
		t.Error("pod still running after Stop")
	}
	if m := mounts(); m != 0 {
		t.Errorf("%d mounts under %s left after Stop", m, r.Path("calico"))
	}
}
