package listcache

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ccmkit/ccmkit/internal/clip"
)

// ErrInconsistent is wrapped by the error of a Driver answer that breaks
// a rule of the answer itself, not of one object in it: a list that holds
// one ID twice (with the same content or not), or a name the caller needs
// to be unique held by two objects. It is the one value behind
// instances.ErrInconsistent and loadbalancer.ErrInconsistent.
var ErrInconsistent = errors.New("inconsistent answer from the driver")

// maxNamed bounds how many repeated keys an Inconsistent error names,
// and how many values it names per key; the rest are counted.
const maxNamed = 3

// Repeat is one key that more than one item of a list holds.
type Repeat struct {
	// Key is the repeated key (an ID, a name).
	Key string
	// With holds, for each item that holds Key, in list order, the value
	// that tells those items apart for a reader (the name under an ID,
	// the ID under a name): len(With) is how many times Key is listed.
	With []string
}

// Repeats returns the keys that more than one of items holds, in the
// order of their first item, each with the with value of every item that
// holds it. An item whose key is "" is not indexed by the caller and is
// left out; with is called only for the items of a repeated key. The
// result is nil when every key is held once.
func Repeats[T any](items []T, key, with func(T) string) []Repeat {
	held := make(map[string]int, len(items)) // key → how many items hold it
	repeated := false
	for _, it := range items {
		if k := key(it); k != "" {
			held[k]++
			repeated = repeated || held[k] > 1
		}
	}
	if !repeated {
		return nil
	}
	var out []Repeat
	at := map[string]int{} // a repeated key → its index in out
	for _, it := range items {
		k := key(it)
		if held[k] < 2 {
			continue
		}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, Repeat{Key: k, With: make([]string, 0, held[k])})
		}
		out[i].With = append(out[i].With, with(it))
	}
	return out
}

// IDsOnce returns nil when items, one List's answer, hold each ID once,
// and otherwise the Inconsistent error naming the repeated IDs with their
// names: the check every list cache runs once per successful List, before
// it indexes the answer. An item whose ID is "" is left out; name is
// called only for the items of a repeated ID.
func IDsOnce[T any](items []T, id, name func(T) string) error {
	if reps := Repeats(items, id, name); reps != nil {
		return Inconsistent(reps, "ID", "name", "each ID once")
	}
	return nil
}

// Inconsistent returns the error of a list that holds reps (at least
// one): it wraps ErrInconsistent and names the first repeated keys (of
// kind key, such as "ID"), each with how many times it is listed and the
// first distinct values (of kind with, such as "name") of its items, and
// counts the rest; every value is cut with clip.Quoted. expected is what
// was expected ("each ID once"):
//
//	inconsistent answer from the driver: ID "i-1" listed 2 times, with
//	names "a" and "b"; ID "i-2" listed 2 times, with name "c" (and 4
//	more IDs listed more than once): expected each ID once
func Inconsistent(reps []Repeat, key, with, expected string) error {
	parts := make([]string, 0, min(len(reps), maxNamed))
	for _, r := range reps[:min(len(reps), maxNamed)] {
		parts = append(parts, fmt.Sprintf("%s %q listed %d times, with %s", key, clip.Quoted(r.Key), len(r.With), some(with, distinct(r.With))))
	}
	more := ""
	if n := len(reps) - maxNamed; n > 0 {
		more = fmt.Sprintf(" (and %d more %ss listed more than once)", n, key)
	}
	return fmt.Errorf("%w: %s%s: expected %s", ErrInconsistent, strings.Join(parts, "; "), more, expected)
}

// distinct returns vals without repeats, in first-seen order.
func distinct(vals []string) []string {
	seen := make(map[string]bool, len(vals))
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// some names vals, values of kind what: `name "a"`, `names "a" and "b"`,
// `names "a", "b", "c" and 2 more`; at most maxNamed of them, each cut
// with clip.Quoted.
func some(what string, vals []string) string {
	if len(vals) == 1 {
		return fmt.Sprintf("%s %q", what, clip.Quoted(vals[0]))
	}
	quoted := make([]string, 0, min(len(vals), maxNamed))
	for _, v := range vals[:min(len(vals), maxNamed)] {
		quoted = append(quoted, fmt.Sprintf("%q", clip.Quoted(v)))
	}
	if n := len(vals) - len(quoted); n > 0 {
		return fmt.Sprintf("%ss %s and %d more", what, strings.Join(quoted, ", "), n)
	}
	last := len(quoted) - 1
	return fmt.Sprintf("%ss %s and %s", what, strings.Join(quoted[:last], ", "), quoted[last])
}
