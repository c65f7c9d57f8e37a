package poll

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A condition that comes true ends the wait with nil after as many checks
// as it took; one that never does ends with the context's error.
func TestUntil(t *testing.T) {
	checks := 0
	if err := Until(context.Background(), time.Millisecond, func() bool { checks++; return checks == 3 }); err != nil || checks != 3 {
		t.Errorf("condition true at the 3rd check: err %v after %d checks, want nil after 3", err, checks)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Until(ctx, time.Millisecond, func() bool { return false }); !errors.Is(err, context.Canceled) {
		t.Errorf("never true, context cancelled: %v, want context.Canceled", err)
	}
	if err := Until(ctx, time.Millisecond, func() bool { return true }); err != nil {
		t.Errorf("already true: %v, want nil even with the context ended", err)
	}
}
