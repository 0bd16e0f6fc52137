package admission

import (
	"regexp"
	"testing"
	"unicode/utf8"

	"github.com/ccmkit/ccmkit/annotation"
)

// TestHiddenCharsAgree checks hiddenChars, the policy's pattern of the
// characters a string annotation must not hold, against the Reconciler's
// parse, for every Unicode code point: the policy's RE2 (CEL's matches)
// is Go's regexp, so they agree exactly when this passes.
func TestHiddenCharsAgree(t *testing.T) {
	var set annotation.Set
	a := set.MustDeclare(annotation.Annotation{Name: "x.io/s", Kind: annotation.KindString, Doc: "d"})
	re := regexp.MustCompile(hiddenChars)
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue // a surrogate: no UTF-8 string holds it
		}
		v := "a" + string(r) + "b"
		_, _, err := a.Text(map[string]string{a.Name: v})
		if refused := err != nil; refused != re.MatchString(v) {
			t.Errorf("%U: the Reconciler refuses it: %v; the policy's pattern matches it: %v", r, refused, re.MatchString(v))
		}
	}
}
