// Package clip bounds the user values that ccmkit quotes in errors, events
// and log lines, so that a huge hostile value (a 1 MiB annotation, an
// instance ID of 10k characters) never makes a huge message. It is
// internal: users see only bounded messages.
package clip

import (
	"fmt"
	"unicode/utf8"
)

// MaxQuoted bounds a user value quoted in an error or an event of a
// Service's load balancer (package annotation's, package loadbalancer's,
// and package admission's words for the same errors): one bound, so the
// three quote a value alike.
const MaxQuoted = 256

// Quoted is Value(s, MaxQuoted).
func Quoted(s string) string { return Value(s, MaxQuoted) }

// Value returns s when it is at most max bytes long, else its first max
// bytes (cut back to a rune boundary, so valid UTF-8 stays valid) followed
// by "… (N bytes)", N being len(s).
func Value(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:i], len(s))
}
