// Package birdtest is the tests' side of dataplane/bird: finding a prepared
// BIRD release or skipping the test that needs it. It lives apart so that
// shipped code (dataplane/bird itself) imports no test helper.
package birdtest

import (
	"errors"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/internal/testenv"
)

// NeedRelease finds a release for a test, or skips it naming the release
// (fails instead where BIRDCAGE_REQUIRE promised bird-<release>).
func NeedRelease(t testenv.TB, name string) bird.Release {
	t.Helper()
	r, err := bird.FindRelease(testenv.Env().BIRDCache, name)
	if errors.Is(err, bird.ErrReleaseMissing) {
		n, _ := release.Parse(name)
		testenv.Missing(t, n.Feature(), err.Error())
		return bird.Release{}
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	return r
}
