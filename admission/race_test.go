//go:build race

package admission_test

// raceEnabled: the race detector slows the CEL interpreter down some
// fiftyfold, so TestCost's longest lists are shorter under it.
const raceEnabled = true
