package provider

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/internal/clip"
)

func TestProviderIDRoundTrip(t *testing.T) {
	c := Codec{Scheme: "acme"}
	tests := []struct {
		name string
		id   string
		path []string
		want string
	}{
		{"id only", "i-123", nil, "acme://i-123"},
		{"region", "i-123", []string{"eu-1"}, "acme://eu-1/i-123"},
		{"two segments", "42", []string{"eu-1", "zone-a"}, "acme://eu-1/zone-a/42"},
		{"uuid", "0b9d3c9e-8f3c-4d7e-9a49-4b1a2f1c0d11", nil, "acme://0b9d3c9e-8f3c-4d7e-9a49-4b1a2f1c0d11"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := c.Format(tc.id, tc.path...)
			if err != nil {
				t.Fatalf("Format(%q, %q): %v", tc.id, tc.path, err)
			}
			if s != tc.want {
				t.Errorf("Format = %q, want %q", s, tc.want)
			}
			p, err := c.Parse(s)
			if err != nil {
				t.Fatalf("Parse(%q): %v", s, err)
			}
			want := ProviderID{Scheme: "acme", Path: tc.path, ID: tc.id}
			if diff := cmp.Diff(want, p); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", s, diff)
			}
			if p.String() != s {
				t.Errorf("String() = %q, want %q", p.String(), s)
			}
		})
	}
}

func TestProviderIDTripleSlash(t *testing.T) {
	p, err := Codec{Scheme: "aws"}.Parse("aws:///us-east-1a/i-0abc")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ProviderID{Scheme: "aws", Path: []string{"us-east-1a"}, ID: "i-0abc"}, p); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestProviderIDErrors(t *testing.T) {
	c := Codec{Scheme: "acme"}
	tests := []struct {
		name, in string
		want     error
	}{
		{"empty", "", ErrEmptyProviderID},
		{"scheme only", "acme://", ErrEmptyProviderID},
		{"scheme and slash", "acme:///", ErrEmptyProviderID},
		{"no separator", "acme:i-1", ErrMalformedProviderID},
		{"bare id", "i-123", ErrMalformedProviderID},
		{"empty scheme", "://i-1", ErrMalformedProviderID},
		{"bad scheme char", "ac me://i-1", ErrMalformedProviderID},
		{"empty segment", "acme://eu-1//i-1", ErrMalformedProviderID},
		{"trailing slash", "acme://eu-1/i-1/", ErrMalformedProviderID},
		{"space in id", "acme://i 1", ErrMalformedProviderID},
		{"newline", "acme://i-1\n", ErrMalformedProviderID},
		{"invalid utf8", "acme://i-\xff", ErrMalformedProviderID},
		{"foreign", "gce://project/zone/vm", ErrForeignProviderID},
		{"case differs", "ACME://i-1", ErrForeignProviderID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Parse(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Parse(%q) = %v, want an error wrapping %v", tc.in, err, tc.want)
			}
		})
	}
	var fe *foreignSchemeError
	if _, err := c.Parse("gce://p/z/vm"); !errors.As(err, &fe) || fe.scheme != "gce" || fe.want != "acme" {
		t.Errorf("Parse(gce://...) = %v, want *foreignSchemeError{scheme: gce, want: acme}", err)
	}

	formatErrs := []struct {
		name string
		c    Codec
		id   string
		path []string
		want error
	}{
		{"empty id", c, "", nil, ErrEmptyProviderID},
		{"slash in id", c, "a/b", nil, ErrMalformedProviderID},
		{"empty path segment", c, "i-1", []string{""}, ErrMalformedProviderID},
		{"space in path", c, "i-1", []string{"eu 1"}, ErrMalformedProviderID},
		{"zero codec", Codec{}, "i-1", nil, ErrMalformedProviderID},
	}
	for _, tc := range formatErrs {
		t.Run("format/"+tc.name, func(t *testing.T) {
			if _, err := tc.c.Format(tc.id, tc.path...); !errors.Is(err, tc.want) {
				t.Errorf("Format(%q, %q) = %v, want an error wrapping %v", tc.id, tc.path, err, tc.want)
			}
		})
	}
}

// TestProviderIDHostile feeds provider IDs that would escape a URL or file
// path, hide characters from a reader, or smuggle escapes (issue 13). Each
// must be rejected with ErrMalformedProviderID, by Parse and by Format, and
// the error must quote the input cut to a bounded length and say what was
// expected.
func TestProviderIDHostile(t *testing.T) {
	c := Codec{Scheme: "acme"}
	long := strings.Repeat("a", 5000) + "?"
	tests := []struct {
		name   string
		reason string
		in     string // the instance-ID part, after "acme://"
		want   string // a substring of Parse's error: what was expected
	}{
		{name: "dot-dot path", reason: "fake://../../i-1 climbs out of a URL or file path the ID is joined into", in: "../../i-1", want: "relative path element"},
		{name: "dot-dot id", reason: "acme://.. names the parent", in: "..", want: "relative path element"},
		{name: "dot id", reason: "acme://. names the current element", in: ".", want: "relative path element"},
		{name: "dot-dot in the middle", reason: "eu/../i-1 is i-1 to a path cleaner but not to the cloud", in: "eu/../i-1", want: "relative path element"},
		{name: "dot segment first", reason: "./i-1", in: "./i-1", want: "relative path element"},
		{name: "triple slash dot-dot", reason: "the ignored empty host does not hide a traversal", in: "/../i-1", want: "relative path element"},
		{name: "query", reason: "a query would be dropped or sent by an HTTP client", in: "i-1?x", want: "query or fragment"},
		{name: "query only", reason: "?x is not an ID", in: "?x", want: "query or fragment"},
		{name: "fragment", reason: "a fragment would be dropped by an HTTP client", in: "i-1#y", want: "query or fragment"},
		{name: "query in the path", reason: "a segment before the ID is checked too", in: "eu?a=b/i-1", want: "query or fragment"},
		{name: "escaped slash", reason: "%2F decodes to / in another layer", in: "a%2Fb", want: "percent-escape"},
		{name: "escaped dot-dot", reason: "%2e%2e decodes to ..", in: "%2e%2e/i-1", want: "percent-escape"},
		{name: "bare percent", reason: "a lone % is an invalid escape", in: "i-1%", want: "percent-escape"},
		{name: "backslash", reason: "\\ is a path separator on Windows and in some URL parsers", in: "..\\i-1", want: "path separator"},
		{name: "zero-width space", reason: "U+200B makes two IDs look alike", in: "i-\u200b1", want: "invisible Unicode format character"},
		{name: "zero-width joiner", reason: "U+200D is invisible", in: "i-1\u200d", want: "invisible Unicode format character"},
		{name: "right-to-left override", reason: "U+202E reverses what a reader sees", in: "i-\u202e1-ved", want: "invisible Unicode format character"},
		{name: "left-to-right isolate", reason: "U+2066 is a bidirectional control", in: "\u2066i-1", want: "invisible Unicode format character"},
		{name: "byte-order mark", reason: "U+FEFF is invisible", in: "\ufeffi-1", want: "invisible Unicode format character"},
		{name: "soft hyphen", reason: "U+00AD is a format character, usually invisible", in: "i\u00ad-1", want: "invisible Unicode format character"},
		{name: "word joiner", reason: "U+2060 is invisible", in: "i-\u20601", want: "invisible Unicode format character"},
		{name: "NUL", reason: "a NUL truncates the ID in C libraries", in: "i-1\x00", want: "control character"},
		{name: "newline", reason: "a newline forges a log line", in: "i-1\nlevel=error", want: "control character"},
		{name: "tab", reason: "whitespace is never part of an ID", in: "i-\t1", want: "whitespace"},
		{name: "no-break space", reason: "U+00A0 looks like nothing", in: "i-\u00a01", want: "whitespace"},
		{name: "ideographic space", reason: "U+3000 is whitespace", in: "i-\u30001", want: "whitespace"},
		{name: "escape sequence", reason: "ESC starts a terminal escape", in: "i-\x1b[31m1", want: "control character"},
		{name: "invalid UTF-8", reason: "not text", in: "i-\xc3\x28", want: "invalid UTF-8"},
		{name: "replacement character", reason: "U+FFFD is what invalid UTF-8 decodes to", in: "i-\ufffd", want: "invalid UTF-8"},
		{name: "long and hostile", reason: "a 5000-character ID is quoted cut short", in: long, want: "…"},
		{name: "double slash", reason: "an empty segment", in: "eu//i-1", want: "empty path segment"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := "acme://" + tc.in
			_, err := c.Parse(in)
			if !errors.Is(err, ErrMalformedProviderID) {
				t.Fatalf("Parse(%q) = %v; want an error wrapping ErrMalformedProviderID (%s)", in, err, tc.reason)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "expected") {
				t.Errorf("Parse(%q) error = %q; want it to contain %q and say what was expected (%s)", in, msg, tc.want, tc.reason)
			}
			if !strings.Contains(msg, strconv.Quote(clip.Quoted(in))) {
				t.Errorf("Parse(%q) error = %q; want it to quote the input, cut to %d characters (%s)", in, msg, clip.MaxQuoted, tc.reason)
			}
			if len(msg) > 600 {
				t.Errorf("Parse error is %d bytes long; want a bounded message (%s)", len(msg), tc.reason)
			}
			segs := strings.Split(strings.TrimPrefix(tc.in, "/"), "/")
			if _, err := c.Format(segs[len(segs)-1], segs[:len(segs)-1]...); !errors.Is(err, ErrMalformedProviderID) {
				t.Errorf("Format(%q) = %v; want ErrMalformedProviderID as Parse gives (%s)", segs, err, tc.reason)
			}
		})
	}
	fe := (&foreignSchemeError{providerID: "x://" + long, scheme: "x", want: "acme"}).Error()
	if len(fe) > clip.MaxQuoted+100 {
		t.Errorf("foreignSchemeError.Error() is %d bytes; want the provider ID cut short", len(fe))
	}
}

func FuzzParseProviderID(f *testing.F) {
	for _, s := range []string{"acme://i-1", "acme://eu/i-1", "acme:///eu/i-1", "", "acme://", "x://a//b", "gce://p/z/i", "acme://\xff", "::///",
		"acme://../../i-1", "acme://..", "acme://i-1?x", "acme://i-1#y", "acme://a%2Fb", "acme://i-\u200b1", "acme://i-\u202e1", "acme://a\\b"} {
		f.Add(s)
	}
	c := Codec{Scheme: "acme"}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := c.Parse(in)
		// Format applies Parse's rules: an instance ID that Parse rejects
		// as malformed, Format rejects too.
		if rest, ok := strings.CutPrefix(in, "acme://"); ok && rest != "" && !strings.Contains(rest, "/") {
			_, ferr := c.Format(rest)
			if errors.Is(err, ErrMalformedProviderID) != errors.Is(ferr, ErrMalformedProviderID) {
				t.Fatalf("Parse(%q) = %v but Format(%q) = %v: the rules differ", in, err, rest, ferr)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrEmptyProviderID) && !errors.Is(err, ErrMalformedProviderID) && !errors.Is(err, ErrForeignProviderID) {
				t.Fatalf("Parse(%q) error %v wraps none of the documented errors", in, err)
			}
			return
		}
		if p.ID == "" || p.Scheme != "acme" {
			t.Fatalf("Parse(%q) = %#v: empty ID or wrong scheme", in, p)
		}
		for _, seg := range append(slices.Clone(p.Path), p.ID) {
			if seg == "." || seg == ".." || strings.ContainsAny(seg, "/?#%\\") || strings.IndexFunc(seg, func(r rune) bool { return unicode.Is(unicode.Cf, r) }) >= 0 {
				t.Fatalf("Parse(%q) accepted segment %q", in, seg)
			}
		}
		// Every parsed ID formats back and parses to the same parts.
		s, err := c.Format(p.ID, p.Path...)
		if err != nil {
			t.Fatalf("Format of parsed %#v: %v", p, err)
		}
		q, err := c.Parse(s)
		if err != nil || !cmp.Equal(p, q) {
			t.Fatalf("round trip of %q via %q: %#v, %v", in, s, q, err)
		}
	})
}
