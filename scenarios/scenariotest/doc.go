// Package scenariotest is the scenario suite's machinery, kept apart from
// the specs in package scenarios as Calico keeps felix/fv/infrastructure
// apart from its fv specs: the suite's configuration (the one place it
// reads the environment), starting a cluster and tearing it down, acting on
// it, registering a spec's figures and writing its row, keeping a failed
// spec's cluster, packet captures, progress lines and the JUnit properties.
//
// It declares the suite's Ginkgo setup nodes (BeforeSuite, the per-spec
// hooks and the row writer), so it is imported by the suite's test package
// only; a spec file calls StartCluster, Act and Report and reads Config and
// Machine. It must not hold a claim: what a spec asserts stays in the spec.
package scenariotest
