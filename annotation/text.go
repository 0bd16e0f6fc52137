package annotation

import "fmt"

// hidden returns the first character of s that a reader of s would not
// see as written, and true; false when there is none. Such a character is
// a C0 control character (U+0000 to U+001F: NUL, tab, newline, carriage
// return, ESC, ...), DEL (U+007F), a C1 control character (U+0080 to
// U+009F), a line or paragraph separator (U+2028, U+2029), or an
// invisible or bidirectional formatting character: the zero-width space,
// joiners and direction marks (U+200B to U+200F, U+061C), the
// bidirectional embeddings and overrides (U+202A to U+202E) and isolates
// (U+2066 to U+2069), and the byte-order mark (U+FEFF). With newlines,
// U+000A is allowed (a Doc is text of several lines). Bytes that are not
// UTF-8 are not its concern: a value read from the API server is valid
// UTF-8 (and package admission refuses an enum value that is not).
//
// These are what make a value look other than it is, in a terminal, a
// log line or the kubectl output of an event: an ESC sequence rewrites
// the screen, a bidirectional override reverses what follows, a
// zero-width space makes two values that look alike differ.
func hidden(s string, newlines bool) (hiddenChar, bool) {
	for i, r := range s {
		if (r != '\n' || !newlines) && hiddenRune(r) {
			return hiddenChar{offset: i, r: r}, true
		}
	}
	return hiddenChar{}, false
}

// hiddenChar is a character hidden found, at a byte offset.
type hiddenChar struct {
	offset int
	r      rune
}

// String says which character is where: "U+0000 at byte offset 3".
func (h hiddenChar) String() string {
	return fmt.Sprintf("%U at byte offset %d", h.r, h.offset)
}

// Error makes hiddenChar the parse error (Error.Err) of a KindString
// value holding it.
func (h hiddenChar) Error() string { return "holds " + h.String() }

// hiddenExpected is what a KindString value holding a character hidden
// refuses was expected to be. It does not say which character is where
// (Err does), so that package admission's policy, which cannot count
// bytes, can say the same.
const hiddenExpected = "a non-empty string without control or invisible characters"

// hiddenRune reports whether r is one of the characters hidden refuses.
func hiddenRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return r == 0x061c || r == 0x2028 || r == 0x2029 || r == 0xfeff
}
