// A package that panics outside any test (in a goroutine left running), after
// its one test passed.
package panicoutside

import (
	"testing"
	"time"
)

func TestPasses(t *testing.T) {
	go func() { panic("a goroutine outside any test") }()
	time.Sleep(100 * time.Millisecond) // lets the goroutine run: the crash is the fixture
}
