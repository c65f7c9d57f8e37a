// A package that does not build.
package buildfail

import "testing"

func TestNeverRuns(t *testing.T) { undefinedIdentifier() }
