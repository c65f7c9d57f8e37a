package nsutil

// Dump's contract, against a fake dump: interrupted dumps are retried until
// one is clean, at most DumpAttempts times, and then reported as interrupted
// with the attempt count; any other error ends it at once; a clean dump's
// result is what the caller gets, never a partial one from before.

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
)

// fakeDump is interrupted for the first `interrupted` calls (returning a
// partial result), then returns err with the full result.
type fakeDump struct {
	interrupted int
	err         error
	calls       int
}

func (f *fakeDump) dump() ([]string, error) {
	f.calls++
	if f.calls <= f.interrupted {
		return []string{"partial"}, netlink.ErrDumpInterrupted
	}
	return []string{"a", "b", "c"}, f.err
}

func TestDumpRetriesInterruptedDumps(t *testing.T) {
	for _, tc := range []struct {
		name        string
		interrupted int
		err         error
		wantCalls   int
		wantResult  string
		wantErr     string // substring; "" for none
		wantIntr    bool   // errors.Is(err, netlink.ErrDumpInterrupted)
	}{
		{name: "clean at once", wantCalls: 1, wantResult: "a b c"},
		{name: "one interruption", interrupted: 1, wantCalls: 2, wantResult: "a b c"},
		{name: "clean at the last attempt", interrupted: DumpAttempts - 1, wantCalls: DumpAttempts, wantResult: "a b c"},
		{name: "interrupted every time", interrupted: DumpAttempts + 5, wantCalls: DumpAttempts, wantResult: "partial",
			wantErr: fmt.Sprintf("list things: dump interrupted by concurrent changes %d times in a row", DumpAttempts), wantIntr: true},
		{name: "other error not retried", err: syscall.EPERM, wantCalls: 1, wantResult: "a b c", wantErr: "operation not permitted"},
		{name: "other error after an interruption", interrupted: 2, err: syscall.ENOBUFS, wantCalls: 3, wantResult: "a b c", wantErr: "no buffer space"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDump{interrupted: tc.interrupted, err: tc.err}
			got, err := Dump("list things", f.dump)
			if f.calls != tc.wantCalls {
				t.Errorf("dump called %d times, want %d", f.calls, tc.wantCalls)
			}
			if s := strings.Join(got, " "); s != tc.wantResult {
				t.Errorf("result %q, want %q", s, tc.wantResult)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
			if errors.Is(err, netlink.ErrDumpInterrupted) != tc.wantIntr {
				t.Errorf("errors.Is(%v, ErrDumpInterrupted) = %v, want %v", err, !tc.wantIntr, tc.wantIntr)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("error %v does not wrap %v", err, tc.err)
			}
		})
	}
}
