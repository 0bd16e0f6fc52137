package annotation_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/annotation"
)

// hiddenCharacters are characters a Default, an enum value and a
// KindString value must not hold: C0 and C1 control characters, DEL, and
// the invisible and bidirectional formatting characters.
var hiddenCharacters = map[string]string{
	"NUL": "\x00", "tab": "\t", "newline": "\n", "CR": "\r", "ESC": "\x1b", "DEL": "\x7f", "NEL": "\u0085", "CSI": "\u009b",
	"zero-width space": "\u200b", "right-to-left mark": "\u200f", "Arabic letter mark": "\u061c",
	"left-to-right embedding": "\u202a", "right-to-left override": "\u202e",
	"left-to-right isolate": "\u2066", "pop directional isolate": "\u2069",
	"line separator": "\u2028", "byte-order mark": "\ufeff",
}

// TestDeclareRefusesHiddenCharacters: a Default or an enum value holding
// a control or invisible character anywhere is refused,
// naming the character and where it is, the value quoted escaped; a Doc
// may hold newlines and nothing else of the kind.
func TestDeclareRefusesHiddenCharacters(t *testing.T) {
	for name, c := range hiddenCharacters {
		t.Run(name, func(t *testing.T) {
			r, _ := utf8.DecodeRuneInString(c)
			want := fmt.Sprintf("%U", r)
			for _, tc := range []struct {
				field string
				a     annotation.Annotation
			}{
				{field: "Default", a: annotation.Annotation{Name: "x.io/s", Kind: annotation.KindString, Default: "ab" + c + "c", Doc: "d"}},
				{field: "Default", a: annotation.Annotation{Name: "x.io/s", Kind: annotation.KindString, Default: "abc" + c, Doc: "d"}},
				{field: "Values[1]", a: annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{"a", "ab" + c + "c"}, Doc: "d"}},
			} {
				var set annotation.Set
				_, err := set.Declare(tc.a)
				msg := errText(err)
				if !strings.Contains(msg, tc.field+" ") || !strings.Contains(msg, "holds "+want+" at byte offset ") || !strings.Contains(msg, ": expected a value without control or invisible characters") {
					t.Errorf("Declare(%s %q): error %q; want one naming %s, the character %s and its offset", tc.field, c, msg, tc.field, want)
				}
				if strings.Contains(msg, c) {
					t.Errorf("Declare(%s %q): the error holds the character unescaped: %q", tc.field, c, msg)
				}
			}
			var set annotation.Set
			doc := "Line one." + c + "Line two."
			_, err := set.Declare(annotation.Annotation{Name: "x.io/d", Kind: annotation.KindBool, Doc: doc})
			if c == "\n" {
				if err != nil {
					t.Errorf("a Doc of two lines is refused: %v", err)
				}
				return
			}
			if wantMsg := `annotation.Set.Declare: annotation "x.io/d": Doc holds ` + want + ` at byte offset 9: expected text without control or invisible characters (newlines are fine)`; errText(err) != wantMsg {
				t.Errorf("Doc %q: error %q; want %q", doc, errText(err), wantMsg)
			}
		})
	}
}

// TestDeclareHiddenMessages pins the words of the refusals.
func TestDeclareHiddenMessages(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		a            annotation.Annotation
		want         string
	}{
		{name: "NUL in a Default", reason: "the character, its offset, the value escaped",
			a:    annotation.Annotation{Name: "x.io/s", Kind: annotation.KindString, Default: "ab\x00", Doc: "d"},
			want: `annotation.Set.Declare: annotation "x.io/s": Default "ab\x00" holds U+0000 at byte offset 2: expected a value without control or invisible characters`},
		{name: "trailing newline in a Default", reason: "a Default is code: not trimmed of it",
			a:    annotation.Annotation{Name: "x.io/b", Kind: annotation.KindBool, Default: "true\n", Doc: "d"},
			want: `annotation.Set.Declare: annotation "x.io/b": Default "true\n" holds U+000A at byte offset 4: expected a value without control or invisible characters`},
		{name: "override in an enum value", reason: "Values are checked one by one",
			a:    annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{"a", "b\u202ec"}, Doc: "d"},
			want: `annotation.Set.Declare: annotation "x.io/e": Values[1] "b\u202ec" holds U+202E at byte offset 1: expected a value without control or invisible characters`},
		{name: "repeated enum value", reason: "which value it repeats",
			a:    annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{"a", "b", "a"}, Doc: "d"},
			want: `annotation.Set.Declare: annotation "x.io/e": Values[2] "a" repeats Values[0]: expected a non-empty, unique value without surrounding space`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var set annotation.Set
			_, err := set.Declare(tc.a)
			if diff := cmp.Diff(tc.want, errText(err)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestParseRefusesHiddenCharacters: a KindString value, plain or per
// port, holding a control or invisible character is an *Error naming the
// annotation, the value escaped, and which character is where; white
// space around a value is still trimmed. A value of another kind holding
// one is refused by its syntax, with the value escaped.
func TestParseRefusesHiddenCharacters(t *testing.T) {
	_, plain := testAnnotations(t)
	_, ports := perPortAnnotations(t)
	for _, tc := range []struct {
		name, reason string
		a            *annotation.Annotation
		value        string
		want         string // the error; "" for none
		where        string // the error's Err, for a KindString value; "" when not checked
		canonical    string
	}{
		{name: "NUL", reason: "inside a string", a: plain[annotation.KindString], value: "lb-\x001", where: "holds U+0000 at byte offset 3",
			want: `annotation "lb.example.com/id": invalid value "lb-\x001": expected a non-empty string without control or invisible characters`},
		{name: "offset in the value as written", reason: "leading white space counts", a: plain[annotation.KindString], value: "  lb\u202e1", where: "holds U+202E at byte offset 4",
			want: `annotation "lb.example.com/id": invalid value "  lb\u202e1": expected a non-empty string without control or invisible characters`},
		{name: "ESC", reason: "a terminal sequence", a: plain[annotation.KindString], value: "\x1b[2Jlb-1", where: "holds U+001B at byte offset 0",
			want: `annotation "lb.example.com/id": invalid value "\x1b[2Jlb-1": expected a non-empty string without control or invisible characters`},
		{name: "byte-order mark", reason: "not white space: not trimmed", a: plain[annotation.KindString], value: "\ufefflb-1",
			want: `annotation "lb.example.com/id": invalid value "\ufefflb-1": expected a non-empty string without control or invisible characters`},
		{name: "surrounding newline", reason: "white space around a value is trimmed, as a YAML block scalar's newline", a: plain[annotation.KindString], value: "lb-1\n", canonical: "lb-1"},
		{name: "per port", reason: "the entry at fault", a: ports[annotation.KindString], value: "80=a,https=b\u200bc", where: "holds U+200B at byte offset 1",
			want: `annotation "lb.example.com/id-ports": invalid value "80=a,https=b\u200bc": expected comma-separated PORT=VALUE entries such as "443=a,https=b", each PORT a port number or name (a DNS-1123 label) listed once, and each VALUE a non-empty string: entry 2 has VALUE "b\u200bc", holding a control or invisible character`},
		{name: "bool", reason: "its syntax refuses it; the value is escaped", a: plain[annotation.KindBool], value: "tr\x00ue",
			want: `annotation "lb.example.com/proxy-protocol": invalid value "tr\x00ue": expected "true" or "false"`},
		{name: "IP", reason: "likewise", a: plain[annotation.KindIP], value: "10.0.0.1\u202e",
			want: `annotation "lb.example.com/ip": invalid value "10.0.0.1\u202e": expected an IPv4 or IPv6 address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := tc.a.Canonical(map[string]string{tc.a.Name: tc.value})
			if diff := cmp.Diff(tc.want, errText(err)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if err == nil {
				if c != tc.canonical {
					t.Errorf("%s: canonical %q; want %q", tc.reason, c, tc.canonical)
				}
				return
			}
			ae, ok := errors.AsType[*annotation.Error](err)
			if !ok || ae.Name != tc.a.Name || ae.Value != tc.value || !errors.Is(err, annotation.ErrInvalid) {
				t.Fatalf("%s: error %#v is not an *Error naming the annotation and value", tc.reason, err)
			}
			if tc.where != "" && (ae.Err == nil || ae.Err.Error() != tc.where) {
				t.Errorf("%s: Err = %v; want %q", tc.reason, ae.Err, tc.where)
			}
			if i := strings.IndexFunc(err.Error(), func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }); i >= 0 {
				t.Errorf("%s: the error holds an unescaped control or format character at %d", tc.reason, i)
			}
		})
	}
	for name, c := range hiddenCharacters {
		a := plain[annotation.KindString]
		if _, _, err := a.Text(map[string]string{a.Name: "a" + c + "b"}); !errors.Is(err, annotation.ErrInvalid) {
			t.Errorf("a string holding %s (%q): error %v; want ErrInvalid", name, c, err)
		}
	}
}

// TestDeclareErrorsBounded: a 1 MiB Name, Kind, Default, enum value or
// Doc, or 100,000 values, makes an error of bounded size through every
// error path of Declare (and of ClaimPrefix), each value cut.
func TestDeclareErrorsBounded(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	many := make([]string, 100000)
	for i := range many {
		many[i] = "v" + strings.Repeat("y", 20) + string(rune('a'+i%26)) + strings.Repeat("z", i/26%7)
	}
	manyUnique := make([]string, 100000)
	for i := range manyUnique {
		manyUnique[i] = "value-" + strings.Repeat("0", 10) + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name string
		a    annotation.Annotation
	}{
		{name: "name", a: annotation.Annotation{Name: huge, Kind: annotation.KindBool, Doc: "d"}},
		{name: "name with a prefix", a: annotation.Annotation{Name: "x.io/" + huge, Kind: annotation.KindBool, Doc: "d"}},
		{name: "kind", a: annotation.Annotation{Name: "x.io/k", Kind: annotation.Kind(huge), Doc: "d"}},
		{name: "doc with a tab", a: annotation.Annotation{Name: "x.io/d", Kind: annotation.KindBool, Doc: huge + "\t"}},
		{name: "default with a NUL", a: annotation.Annotation{Name: "x.io/s", Kind: annotation.KindString, Default: huge + "\x00", Doc: "d"}},
		{name: "default that does not parse", a: annotation.Annotation{Name: "x.io/i", Kind: annotation.KindInt, Default: huge, Doc: "d"}},
		{name: "values on a bool", a: annotation.Annotation{Name: "x.io/b", Kind: annotation.KindBool, Values: []string{huge, huge}, Doc: "d"}},
		{name: "many values on a bool", a: annotation.Annotation{Name: "x.io/b", Kind: annotation.KindBool, Values: many, Doc: "d"}},
		{name: "value with surrounding space", a: annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{huge + " "}, Doc: "d"}},
		{name: "repeated value", a: annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{huge, huge}, Doc: "d"}},
		{name: "value with a NUL", a: annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{huge + "\x00"}, Doc: "d"}},
		{name: "per-port value with a comma", a: annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{huge + ","}, PerPort: true, Doc: "d"}},
		{name: "default not among huge values", a: annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{huge, huge + "y"}, Default: "z", Doc: "d"}},
		{name: "default not among many values", a: annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: manyUnique, Default: "z", Doc: "d"}},
		{name: "per-port default not among huge values", a: annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{huge, huge + "y"}, Default: "z", PerPort: true, Doc: "d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var set annotation.Set
			_, err := set.Declare(tc.a)
			checkBounded(t, err)
		})
	}
	t.Run("claimed prefix", func(t *testing.T) {
		var set annotation.Set
		checkBounded(t, set.ClaimPrefix(huge))
		checkBounded(t, set.ClaimPrefix("x.io/"+huge))
	})
	t.Run("parse against huge values", func(t *testing.T) {
		var set annotation.Set
		for _, a := range []annotation.Annotation{
			{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{huge, huge + "y"}, Doc: "d"},
			{Name: "x.io/p", Kind: annotation.KindEnum, Values: []string{huge, huge + "y"}, PerPort: true, Doc: "d"},
			{Name: "x.io/m", Kind: annotation.KindEnum, Values: manyUnique, Doc: "d"},
		} {
			set.MustDeclare(a)
		}
		err := set.Validate(map[string]string{"x.io/e": "z", "x.io/p": "80=z", "x.io/m": "z"})
		joined, _ := err.(interface{ Unwrap() []error })
		if joined == nil || len(joined.Unwrap()) != 3 {
			t.Fatalf("Validate: %v; want three errors", err)
		}
		for _, e := range joined.Unwrap() {
			checkBounded(t, e)
		}
		if m := err.Error(); !strings.Contains(m, `… (100000 values)`) {
			t.Errorf("the error for 100,000 values does not say how many: %.2000s", m)
		}
	})
}

// checkBounded fails t unless err is an error of at most 2 KiB of valid
// UTF-8.
func checkBounded(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	if msg := err.Error(); len(msg) > 2048 || !utf8.ValidString(msg) {
		t.Errorf("error of %d bytes (valid UTF-8: %v): %.300q…; want at most 2 KiB", len(msg), utf8.ValidString(msg), msg)
	}
}

// TestExpectedBounded: an enum's Expected lists its values within a
// bound and says how many there are; the Markdown reference lists them
// all.
func TestExpectedBounded(t *testing.T) {
	values := make([]string, 200)
	for i := range values {
		values[i] = "zone-" + strconv.Itoa(i)
	}
	var set annotation.Set
	a := set.MustDeclare(annotation.Annotation{Name: "x.io/zone", Kind: annotation.KindEnum, Values: values, Doc: "d"})
	got := a.Expected()
	if !strings.HasPrefix(got, `one of "zone-0", "zone-1", "zone-2", `) || !strings.HasSuffix(got, `, … (200 values)`) || len(got) > 600 {
		t.Errorf("Expected() = %q; want the first values within 512 bytes, and the count", got)
	}
	var b strings.Builder
	if err := set.WriteMarkdown(&b, "T"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"zone-198", "zone-199"`+"\n") {
		t.Errorf("the Markdown reference does not list every value:\n%s", b.String())
	}
}
