package listcache_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/internal/listcache"
)

// item is a listed object: a key and the value that tells copies apart.
type item struct{ id, name string }

func itemID(i item) string   { return i.id }
func itemName(i item) string { return i.name }

func TestRepeats(t *testing.T) {
	for _, tc := range []struct {
		name   string
		items  []item
		want   []listcache.Repeat
		reason string
	}{
		{name: "each once", items: []item{{"a", "x"}, {"b", "y"}}, want: nil, reason: "a consistent list has no repeat"},
		{name: "empty keys", items: []item{{"", "x"}, {"", "y"}}, want: nil, reason: "an empty key is not indexed: never a repeat"},
		{
			name:   "in order of the first item",
			items:  []item{{"b", "1"}, {"a", "2"}, {"a", "3"}, {"b", "4"}, {"a", "2"}},
			want:   []listcache.Repeat{{Key: "b", With: []string{"1", "4"}}, {Key: "a", With: []string{"2", "3", "2"}}},
			reason: "every item of a repeated key, exact copies included, in list order",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, listcache.Repeats(tc.items, itemID, itemName)); diff != "" {
				t.Errorf("Repeats (-want +got):\n%s\n(%s)", diff, tc.reason)
			}
		})
	}
}

func TestInconsistent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reps   []listcache.Repeat
		want   string
		reason string
	}{
		{
			name:   "one copy",
			reps:   []listcache.Repeat{{Key: "i-1", With: []string{"n", "n"}}},
			want:   `inconsistent answer from the driver: ID "i-1" listed 2 times, with name "n": expected each ID once`,
			reason: "an exact copy names its one value once",
		},
		{
			name:   "two values",
			reps:   []listcache.Repeat{{Key: "i-1", With: []string{"a", "b"}}},
			want:   `inconsistent answer from the driver: ID "i-1" listed 2 times, with names "a" and "b": expected each ID once`,
			reason: "both names",
		},
		{
			name: "bounded",
			reps: []listcache.Repeat{
				{Key: "i-1", With: []string{"a", "b", "c", "d", "e"}},
				{Key: "i-2", With: []string{"f", "g", "h"}},
				{Key: "i-3", With: []string{"i", "i"}},
				{Key: "i-4", With: []string{"j", "k"}},
				{Key: "i-5", With: []string{"l", "m"}},
			},
			want: `inconsistent answer from the driver: ID "i-1" listed 5 times, with names "a", "b", "c" and 2 more; ` +
				`ID "i-2" listed 3 times, with names "f", "g" and "h"; ID "i-3" listed 2 times, with name "i" ` +
				`(and 2 more IDs listed more than once): expected each ID once`,
			reason: "the first three keys and three values each, the rest counted",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := listcache.Inconsistent(tc.reps, "ID", "name", "each ID once")
			if !errors.Is(err, listcache.ErrInconsistent) {
				t.Errorf("Inconsistent = %v, want an error wrapping ErrInconsistent", err)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("Inconsistent (-want +got):\n%s\n(%s)", diff, tc.reason)
			}
		})
	}
}

// TestInconsistentHugeValues checks that a hostile list (huge IDs and
// names, thousands of repeats) makes a short message.
func TestInconsistentHugeValues(t *testing.T) {
	huge := strings.Repeat("x", 4096) // beyond clip.MaxQuoted
	var items []item
	for n := range 5000 {
		id := fmt.Sprintf("%s-%d", huge, n%1000)
		items = append(items, item{id: id, name: fmt.Sprintf("%s-%d", huge, n)})
	}
	err := listcache.Inconsistent(listcache.Repeats(items, itemID, itemName), "ID", "name", "each ID once")
	if len(err.Error()) > 4096 || !strings.Contains(err.Error(), "(and 997 more IDs listed more than once)") {
		t.Errorf("Inconsistent of 1000 repeated huge IDs: %d bytes, ending %q; want at most 4096 naming 3 and counting 997", len(err.Error()), err.Error()[max(0, len(err.Error())-120):])
	}
}

// TestCheckInconsistent checks the blocks' test helper on its own: it
// fails each error that is not what the blocks must return.
func TestCheckInconsistent(t *testing.T) {
	notFound := errors.New("not found")
	good := listcache.Inconsistent([]listcache.Repeat{{Key: "i-1", With: []string{"a", "b"}}}, "ID", "name", "each ID once")
	for _, tc := range []struct {
		name   string
		err    error
		names  []string
		ok     bool
		reason string
	}{
		{name: "good", err: good, names: []string{"i-1", "a", "b"}, ok: true, reason: "wraps the sentinel, quotes every name"},
		{name: "unquoted name", err: good, names: []string{"i-1", "c"}, reason: "c is not named"},
		{name: "plain error", err: errors.New(`"i-1"`), names: []string{"i-1"}, reason: "no sentinel"},
		{name: "nil", err: nil, reason: "no error at all"},
		{name: "gone", err: errors.Join(good, notFound), names: []string{"i-1"}, reason: "an inconsistent list is never not-found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := listcache.CheckInconsistent(tc.err, notFound, tc.names...); (got == nil) != tc.ok {
				t.Errorf("CheckInconsistent(%v) = %v, want ok %v: %s", tc.err, got, tc.ok, tc.reason)
			}
		})
	}
}
