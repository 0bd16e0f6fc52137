//go:build !race

package scale_test

// raceSkips is empty without -race: every scenario runs.
var raceSkips []string

// raceBuild is false without -race: bring-up interleaves Nodes and
// Services, as in a real cluster.
const raceBuild = false
