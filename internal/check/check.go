// Package check holds the input checks every ccmkit block shares, so that
// each is written once and words its error the same way in every package
// (CONTRIBUTING.md, rules E1–E3).
package check

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ccmkit/ccmkit/internal/clip"
)

// IsNil reports whether v is nil or an interface holding a typed nil
// pointer, map, slice, func, channel or interface: a value whose methods
// would panic or do nothing. It is safe for concurrent use.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// Driver returns nil when d is a usable driver, and otherwise the one
// error every constructor gives for a missing one (rule E3):
//
//	<fn>: driver is nil: expected a non-nil <want>
//
// fn is the qualified constructor ("routes.NewTable") and want the driver
// interface it takes ("routes.RouteDriver"). A typed nil counts as nil.
func Driver(fn string, d any, want string) error {
	if !IsNil(d) {
		return nil
	}
	if d == nil {
		return fmt.Errorf("%s: driver is nil: expected a non-nil %s", fn, want)
	}
	return fmt.Errorf("%s: driver is a nil %T: expected a non-nil %s", fn, d, want)
}

// ClusterName returns an error naming field when name, a CCM's
// --cluster-name, holds a space or a character that is not printable
// (a control, format or invisible character): the name goes into every
// load balancer's name and tags, where such a character would forge or
// hide part of it. The message quotes the name cut (clip.Quoted). An
// empty name is the caller's to judge.
func ClusterName(field, name string) error {
	if strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) < 0 {
		return nil
	}
	return fmt.Errorf("%s %q: expected printable characters without spaces, as a --cluster-name (the upstream default is %q)", field, clip.Quoted(name), "kubernetes")
}

// Field checks value, found at path, with is (one of apimachinery's
// validation.Is… functions) and returns the error for what it finds:
// what was expected, then is's messages, with value cut (clip.Quoted); nil
// when it finds nothing.
func Field(path *field.Path, value string, is func(string) []string, expected string) field.ErrorList {
	msgs := is(value)
	if len(msgs) == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(path, clip.Quoted(value), expected+": "+strings.Join(msgs, "; "))}
}
