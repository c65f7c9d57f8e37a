// Package env owns every BIRDCAGE_* environment variable: its name, its
// default, the values it accepts and what it does. Load reads them all at
// once into a typed Config, and a bad value is an error naming the variable
// and what would be valid.
//
// Load is called only at the edges of a process: the scenario suite's setup
// (scenarios/scenariotest/suite.go), the CLI's root command (cmd/birdcage), the
// programmer's main (cmd/birdcage-programmer), the CI helpers' mains
// (ci/soakrun) and a few test-package setups that have no other edge
// (internal/testenv, the opt-in benchmarks and root tests). Everything
// below them takes the values as arguments or options (harness.Options, the
// machine profile, the judge's inputs) and reads no environment itself.
//
// It is not internal/machine: the machine profile is one value built from
// three of these knobs (Config.Machine) and handed down; this package is
// where the run's settings come in, that one is what a wait or a probe rate
// asks of the machine.
//
// A process that hands settings to a child (the harness starting the
// programmer, the CLI starting `go test`, a test re-running itself) names
// them with this package's constants (Set), never a string literal:
// docs/knobs.md, generated from Knobs, lists them all.
package env

//go:generate go run ./mkdocs ../../docs/knobs.md
