// Package hidden is an internal package: rule A1's result shape does not
// apply to it, so NewValue is not reported.
package hidden

// Value is a value.
type Value struct{ n int }

// Options configures a Value.
type Options struct{ N int }

// NewValue cannot fail, and returns a value.
func NewValue(opts Options) Value { return Value{opts.N} }
