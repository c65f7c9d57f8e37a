// Package poll is the one wait-for-a-condition loop the harness and its
// control server share: check, then check again every interval until the
// condition holds or the context ends. It must not sleep for a verdict:
// callers poll a real observable (a programmer's status, a render count).
package poll

import (
	"context"
	"time"
)

// Until checks cond at once and then every interval until it holds (nil)
// or ctx ends (ctx.Err()).
func Until(ctx context.Context, every time.Duration, cond func() bool) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
