package run

// Nothing a run makes may outlive it, even when it is made while the run is
// being closed (a signal arrives mid-build): a cleanup registered during
// Close is run by that Close, one registered after runs at once, and Guard
// refuses to let anything new be made once Close has started. The run dir
// goes last.

import (
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

func newRun(t *testing.T) *Run {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a run's state dir is under " + StateRoot + ": run as root")
	}
	r, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestCleanupsRegisteredDuringAndAfterClose(t *testing.T) {
	r := newRun(t)
	var mu sync.Mutex
	var ran []string
	record := func(what string) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, what)
			return nil
		}
	}
	dirGone := func() bool { _, err := os.Stat(r.Dir); return errors.Is(err, os.ErrNotExist) }

	// 1. A cleanup that, while Close runs it, lets another goroutine
	// register one more (as a build still under way would) and refuses a
	// Guard.
	var guardErr error
	r.Defer("first", record("first"))
	r.Defer("second", func() error {
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Defer("late", record("late"))
			guardErr = r.Guard("too late", record("guarded"))
		}()
		<-done
		if dirGone() {
			t.Error("run dir removed before the cleanups ran")
		}
		return record("second")()
	})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"second", "first", "late"}; !slices.Equal(ran, want) {
		t.Errorf("cleanups ran %v, want %v (the late one by the same Close)", ran, want)
	}
	if !errors.Is(guardErr, ErrClosed) {
		t.Errorf("Guard during Close: %v, want ErrClosed", guardErr)
	}
	if !dirGone() {
		t.Error("run dir left after Close")
	}

	// 2. After Close: Defer runs the cleanup at once; Guard refuses.
	r.Defer("after", record("after"))
	if ran[len(ran)-1] != "after" {
		t.Errorf("a cleanup registered after Close did not run at once: %v", ran)
	}
	if err := r.Guard("after", record("guarded")); !errors.Is(err, ErrClosed) {
		t.Errorf("Guard after Close: %v, want ErrClosed", err)
	}
	if slices.Contains(ran, "guarded") {
		t.Error("a refused Guard's cleanup ran")
	}
}

// Positive control: before Close, Guard registers like Defer.
func TestGuardBeforeClose(t *testing.T) {
	r := newRun(t)
	ran := false
	if err := r.Guard("thing", func() error { ran = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Fatal("Guard ran its cleanup before Close")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Error("Close did not run a guarded cleanup")
	}
}

// A kept run (a failed spec left up for debugging) keeps what outlives the
// process and stops what lives only in it: Keep runs the DeferLocal
// cleanups, newest first, and none of the others; a later Close removes
// nothing, and the run counts as alive.
func TestKeepStopsOnlyLocalResources(t *testing.T) {
	r := newRun(t)
	t.Cleanup(func() { _ = os.RemoveAll(r.Dir) })
	var ran []string
	record := func(what string) func() error {
		return func() error { ran = append(ran, what); return nil }
	}
	r.Defer("netns", record("netns"))
	r.DeferLocal("route timeline", record("route timeline"))
	r.Defer("bird container", record("bird container"))
	r.DeferLocal("probe session", func() error { ran = append(ran, "probe session"); return errors.New("socket busy") })
	err := r.Keep()
	if want := []string{"probe session", "route timeline"}; !slices.Equal(ran, want) {
		t.Errorf("Keep ran %v, want only the local ones newest first %v", ran, want)
	}
	if err == nil || !strings.Contains(err.Error(), "stop probe session: socket busy") {
		t.Errorf("Keep's error %v should name the local cleanup that failed", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 2 {
		t.Errorf("Close after Keep ran %v: a kept run's resources must stay", ran)
	}
	if _, err := os.Stat(r.Dir); err != nil || !Alive(r.ID) {
		t.Errorf("a kept run's dir must stay (%v) and count as alive (%v)", err, Alive(r.ID))
	}
	// Positive control: without Keep, Close runs every cleanup.
	r2 := newRun(t)
	ran = nil
	r2.Defer("netns", record("netns"))
	r2.DeferLocal("route timeline", record("route timeline"))
	if err := r2.Close(); err != nil || len(ran) != 2 {
		t.Errorf("Close ran %v (%v), want both", ran, err)
	}
}
