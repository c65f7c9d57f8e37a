// A package for ci/vm/gotest's own test: what it does depends on
// GOTEST_FAKE (pass, fail, crash).
package fake

import (
	"os"
	"testing"
)

func TestOne(t *testing.T) {
	t.Run("sub", func(t *testing.T) {
		switch os.Getenv("GOTEST_FAKE") {
		case "fail":
			t.Fatal("failed on purpose")
		case "crash":
			t.Log("CRASH-HERE")
			select {} // the fake VM ends while this test runs
		}
	})
}

func TestTwo(t *testing.T) {}
