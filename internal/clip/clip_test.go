package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValue(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		max      int
		want     string
		reason   string
	}{
		{name: "short", in: "abc", max: 5, want: "abc", reason: "within the bound: unchanged"},
		{name: "exact", in: "abcde", max: 5, want: "abcde", reason: "at the bound: unchanged"},
		{name: "long", in: "abcdef", max: 5, want: "abcde… (6 bytes)", reason: "cut, with the full length"},
		{name: "rune boundary", in: "abcdé", max: 5, want: "abcd… (6 bytes)", reason: "é is two bytes: never cut inside it"},
		{name: "empty", in: "", max: 0, want: "", reason: "nothing to cut"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Value(tc.in, tc.max); got != tc.want {
				t.Errorf("Value(%q, %d) = %q; want %q (%s)", tc.in, tc.max, got, tc.want, tc.reason)
			}
		})
	}
	huge := strings.Repeat("€", 1<<18)
	if got := Value(huge, 256); len(got) > 300 || !utf8.ValidString(got) {
		t.Errorf("Value of %d bytes = %d bytes, valid UTF-8 %v; want a short, valid string", len(huge), len(got), utf8.ValidString(got))
	}
}
