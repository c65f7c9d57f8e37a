// Package stattest holds the two tests birdcage's upgrade gate
// (report/compare) judges repeated figures with: the Mann–Whitney U rank
// test (two samples of a figure: did NEW's runs shift against BASE's?
// two-sided P, one-sided PGreater) and Fisher's exact test on a 2×2 table
// (did a larger share of NEW's runs land in a figure's slow mode?); and
// Holm's adjustment, which keeps the family-wise error rate of a
// scenario's several tests at α.
//
// It is pure arithmetic on float64 samples: no I/O, no results types, no
// thresholds. Which figures are judged, at what significance and with
// what minimum effect is compare's business.
package stattest
