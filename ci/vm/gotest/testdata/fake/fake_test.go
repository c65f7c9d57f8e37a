// A package for ci/vm/gotest's own test: what it does depends on
// GOTEST_FAKE (pass, fail, crash; guest-panic panics the guest kernel, and
// only inside the birdcage VM: a by-hand check of the real crash path).
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
		case "guest-panic":
			if h, _ := os.Hostname(); h != "birdcage-vm" {
				t.Fatalf("GOTEST_FAKE=guest-panic panics the kernel: only inside the birdcage VM, not on %q", h)
			}
			t.Log("panicking the guest kernel")
			os.WriteFile("/proc/sysrq-trigger", []byte("c"), 0)
			select {}
		}
	})
}

func TestTwo(t *testing.T) {}
