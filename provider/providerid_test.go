package provider

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
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
	var fe *ForeignSchemeError
	if _, err := c.Parse("gce://p/z/vm"); !errors.As(err, &fe) || fe.Scheme != "gce" || fe.Want != "acme" {
		t.Errorf("Parse(gce://...) = %v, want *ForeignSchemeError{Scheme: gce, Want: acme}", err)
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

func FuzzParseProviderID(f *testing.F) {
	for _, s := range []string{"acme://i-1", "acme://eu/i-1", "acme:///eu/i-1", "", "acme://", "x://a//b", "gce://p/z/i", "acme://\xff", "::///"} {
		f.Add(s)
	}
	c := Codec{Scheme: "acme"}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := c.Parse(in)
		if err != nil {
			if !errors.Is(err, ErrEmptyProviderID) && !errors.Is(err, ErrMalformedProviderID) && !errors.Is(err, ErrForeignProviderID) {
				t.Fatalf("Parse(%q) error %v wraps none of the documented errors", in, err)
			}
			return
		}
		if p.ID == "" || p.Scheme != "acme" {
			t.Fatalf("Parse(%q) = %#v: empty ID or wrong scheme", in, p)
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
