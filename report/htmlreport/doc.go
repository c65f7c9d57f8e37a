// Package htmlreport renders scenario results (results.ResultsFile) for
// people: one self-contained HTML page (inline CSS and SVG, no script, no
// fetch of anything) that a person opens from a CI artifact, with per
// scenario the probe delivery of every flow over time (outages are holes),
// each node's cluster routes as swimlanes coloured by owner (programmer,
// BIRD, another protocol, no route), the harness's events as vertical
// markers on the same monotonic clock, the figures with their
// distributions, the verdict with its failure, and the run's environment;
// a side-by-side page of two runs with the comparison on top; and a
// Markdown summary for CI step summaries.
//
// It reads results only; it must not run anything or reach the network.
package htmlreport
