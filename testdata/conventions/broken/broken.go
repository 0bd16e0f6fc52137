// Package broken breaks, on purpose, each rule conventions_test.go checks;
// TestConventionsFixture lists what it must be reported for. The comment
// "breaks <check>" above a declaration names what it breaks; where the
// declaration must have no doc comment, a blank line keeps it detached.
package broken

import (
	"errors"
	"fmt"
)

// Widget is what the constructors below build.
type Widget struct{ n int }

// Options configures a Widget.
type Options struct{ Size int }

// Value is what a constructor that cannot fail returns.
type Value struct{ n int }

// Source is an interface of this package, a constructor's result.
type Source interface{ Read() int }

// GoodConfig has a Validate method, as rule A2 asks.
type GoodConfig struct{}

// Validate checks c.
func (GoodConfig) Validate() error { return nil }

// breaks A8/type-doc

type Bare struct{}

// Option breaks A1/option-type.
type Option func(*Options)

// BrokenConfig breaks A2/config-validate: it has no Validate method.
type BrokenConfig struct{}

// breaks A8/value-doc

var Loose = 1

// DefaultSize breaks A5/exported-default.
const DefaultSize = 3

// breaks A8/func-doc

func Undocumented() {}

// breaks A8/func-doc on a method

func (Widget) Undocumented() {}

// WithSize breaks A1/functional-option.
func WithSize(n int) Option { return func(o *Options) { o.Size = n } }

// Resize breaks A2/options-input: it is not a constructor.
func Resize(w *Widget, opts Options) { w.n = opts.Size }

// NewOptionsFirst breaks A1/options-last, and so A1/last-param-options.
func NewOptionsFirst(opts Options, n int) (*Widget, error) { return &Widget{n}, nil }

// NewPositional breaks A1/last-param-options.
func NewPositional(n int) (*Widget, error) { return &Widget{n}, nil }

// NewExempt would break A1/last-param-options, but the fixture's
// constructorExceptions lists it.
func NewExempt(n int) (*Widget, error) { return &Widget{n}, nil }

// NewNoError breaks A1/result-shape: one result.
func NewNoError(opts Options) *Widget { return &Widget{opts.Size} }

// NewValueFirst breaks A1/result-shape: a value, not a pointer, first.
func NewValueFirst(opts Options) (Widget, error) { return Widget{opts.Size}, nil }

// NewNotError breaks A1/result-shape: a bool, not an error, second.
func NewNotError(opts Options) (*Widget, bool) { return &Widget{opts.Size}, true }

// NewThree breaks A1/result-shape: three results.
func NewThree(opts Options) (*Widget, int, error) { return &Widget{opts.Size}, 0, nil }

// NewForeign breaks A1/result-shape: an interface of another package cannot
// be told from a value type by a parse.
func NewForeign(opts Options) (fmt.Stringer, error) { return nil, nil }

// NewValue would break A1/result-shape, but the fixture's valueConstructors
// lists it.
func NewValue(opts Options) Value { return Value{opts.Size} }

// NewWidget has the one constructor shape.
func NewWidget(opts Options) (*Widget, error) { return &Widget{opts.Size}, nil }

// NewNamed has it with named results.
func NewNamed(opts Options) (w *Widget, err error) { return &Widget{opts.Size}, nil }

// NewSource returns an interface the package declares.
func NewSource(opts Options) (Source, error) { return nil, nil }

// NewChild is a method, not a constructor: rule A1 does not apply.
func (w *Widget) NewChild(n int) Widget { return Widget{n} }

func newHidden(n int) Widget { return Widget{n} }

// Check breaks E1/message three times, once per wrong shape.
func Check(n int) error {
	switch n {
	case 0:
		return errors.New("n 0; expected 1")
	case 1:
		return errors.New("n 1, want 2")
	case 2:
		return errors.New("n: want 3")
	}
	return fmt.Errorf("n %d: expected 0, 1 or 2", n)
}
