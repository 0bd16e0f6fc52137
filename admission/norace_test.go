//go:build !race

package admission_test

// raceEnabled: see race_test.go.
const raceEnabled = false
