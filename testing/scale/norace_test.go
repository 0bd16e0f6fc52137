//go:build !race

package scale_test

// raceSkips is empty without -race: every scenario runs.
var raceSkips []string
