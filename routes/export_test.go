package routes

// The whole form of the differ is unexported (diffwhole.go); the external
// tests and the benchmark reach it through these names.

// WholeInput is wholeInput.
type WholeInput = wholeInput

// DiffWhole is diffWhole.
func DiffWhole(in WholeInput) Changes { return diffWhole(in) }
