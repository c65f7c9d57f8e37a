package scenarios_test

// The kernel protocol each owner's routes carry, by the design's numbers:
// handovers (judge.Handovers) are read between these.
