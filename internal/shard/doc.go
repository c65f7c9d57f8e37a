// Package shard splits the scenario suite across machines: `birdcage run
// --shard i/n` and `ci/test --shard i/n` each run one of n parts, chosen
// deterministically and evenly by the specs' recorded durations, and
// `birdcage results merge` joins the parts' results files into one run's.
//
// It is pure: it takes specs (full text, labels, seconds) and returns the
// parts and the Ginkgo focus that selects one. Listing the suite (a dry
// run) and reading durations from results files is the caller's.
package shard
