package annotation_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/internal/annotationtest"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// testAnnotations declares one annotation of every kind.
var testAnnotations = annotationtest.EveryKind

func TestAnnotationGetters(t *testing.T) {
	_, k := testAnnotations(t)
	type result struct {
		Value any
		Set   bool
		Err   string
	}
	get := func(a *annotation.Annotation, m map[string]string) result {
		var v any
		var set bool
		var err error
		switch a.Kind {
		case annotation.KindBool:
			v, set, err = a.Bool(m)
		case annotation.KindInt:
			v, set, err = a.Int(m)
		case annotation.KindDuration:
			v, set, err = a.Duration(m)
		case annotation.KindEnum:
			v, set, err = a.Enum(m)
		case annotation.KindIP:
			var ip netip.Addr
			ip, set, err = a.IP(m)
			v = ip.String()
		case annotation.KindCIDRList:
			var ps []netip.Prefix
			ps, set, err = a.CIDRs(m)
			var s []string
			for _, p := range ps {
				s = append(s, p.String())
			}
			v = s
		case annotation.KindString:
			v, set, err = a.Text(m)
		}
		r := result{Value: v, Set: set}
		if err != nil {
			r.Err = err.Error()
			if !errors.Is(err, annotation.ErrInvalid) {
				r.Err = "NOT ErrInvalid: " + r.Err
			}
		}
		return r
	}
	cases := []struct {
		name, reason string
		kind         annotation.Kind
		value        *string // nil: absent
		want         result
	}{
		{"bool absent", "default, not set", annotation.KindBool, nil, result{Value: false}},
		{"bool false", "set to the default is set", annotation.KindBool, ptr("false"), result{Value: false, Set: true}},
		{"bool true spaced", "surrounding space is ignored", annotation.KindBool, ptr(" true "), result{Value: true, Set: true}},
		{"bool yes", "only true/false", annotation.KindBool, ptr("yes"), result{Value: false, Set: true,
			Err: `annotation "lb.example.com/proxy-protocol": invalid value "yes": expected "true" or "false"`}},
		{"int absent", "no default: zero, not set", annotation.KindInt, nil, result{Value: int64(0)}},
		{"int ok", "in range", annotation.KindInt, ptr("42"), result{Value: int64(42), Set: true}},
		{"int out of range", "bounds are enforced", annotation.KindInt, ptr("0"), result{Value: int64(0), Set: true,
			Err: `annotation "lb.example.com/max-connections": invalid value "0": expected an integer from 1 to 100000`}},
		{"int garbage", "never falls back to the default", annotation.KindInt, ptr("12abc"), result{Value: int64(0), Set: true,
			Err: `annotation "lb.example.com/max-connections": invalid value "12abc": expected an integer from 1 to 100000`}},
		{"duration absent", "default", annotation.KindDuration, nil, result{Value: time.Minute}},
		{"duration ok", "Go syntax", annotation.KindDuration, ptr("1m30s"), result{Value: 90 * time.Second, Set: true}},
		{"duration negative", "negative durations make no sense here", annotation.KindDuration, ptr("-1s"), result{Value: time.Duration(0), Set: true,
			Err: `annotation "lb.example.com/idle-timeout": invalid value "-1s": expected a non-negative duration such as "30s" or "1m30s"`}},
		{"enum absent", "default", annotation.KindEnum, nil, result{Value: "round-robin"}},
		{"enum ok", "a declared value", annotation.KindEnum, ptr("least-connections"), result{Value: "least-connections", Set: true}},
		{"enum case", "values are exact", annotation.KindEnum, ptr("Round-Robin"), result{Value: "", Set: true,
			Err: `annotation "lb.example.com/algorithm": invalid value "Round-Robin": expected one of "round-robin", "least-connections"`}},
		{"ip absent", "no default: zero Addr", annotation.KindIP, nil, result{Value: "invalid IP"}},
		{"ip v6", "canonical form", annotation.KindIP, ptr("2001:DB8::0001"), result{Value: "2001:db8::1", Set: true}},
		{"ip zone", "zones are not addresses of a load balancer", annotation.KindIP, ptr("fe80::1%eth0"), result{Value: "invalid IP", Set: true,
			Err: `annotation "lb.example.com/ip": invalid value "fe80::1%eth0": expected an IPv4 or IPv6 address`}},
		{"cidrs", "masked, sorted, unique", annotation.KindCIDRList, ptr("2001:db8::1/32, 10.1.2.3/8,10.0.0.0/8"), result{Value: []string{"10.0.0.0/8", "2001:db8::/32"}, Set: true}},
		{"cidrs empty item", "a trailing comma is a mistake", annotation.KindCIDRList, ptr("10.0.0.0/8,"), result{Value: []string(nil), Set: true,
			Err: `annotation "lb.example.com/internal-ranges": invalid value "10.0.0.0/8,": expected a comma-separated list of CIDRs such as "10.0.0.0/8,2001:db8::/32"`}},
		{"cidrs empty", "set but empty", annotation.KindCIDRList, ptr(""), result{Value: []string(nil), Set: true,
			Err: `annotation "lb.example.com/internal-ranges": invalid value "": expected a comma-separated list of CIDRs such as "10.0.0.0/8,2001:db8::/32"`}},
		{"string ok", "kept", annotation.KindString, ptr("lb-123"), result{Value: "lb-123", Set: true}},
		{"string empty", "empty is not a value", annotation.KindString, ptr(" "), result{Value: "", Set: true,
			Err: `annotation "lb.example.com/id": invalid value " ": expected a non-empty string`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := k[tc.kind]
			m := map[string]string{"unrelated": "x"}
			if tc.value != nil {
				m[a.Name] = *tc.value
			}
			if diff := cmp.Diff(tc.want, get(a, m)); diff != "" {
				t.Errorf("%s: (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestAnnotationWrongKind(t *testing.T) {
	_, k := testAnnotations(t)
	_, _, err := k[annotation.KindInt].Bool(nil)
	if err == nil || !strings.Contains(err.Error(), `"lb.example.com/max-connections" is declared as int, not bool`) {
		t.Errorf("Bool on an int annotation: error = %v; want a kind mismatch naming it", err)
	}
}

func TestAnnotationErrorFields(t *testing.T) {
	_, k := testAnnotations(t)
	_, _, err := k[annotation.KindDuration].Duration(map[string]string{"lb.example.com/idle-timeout": "soon"})
	var ae *annotation.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an *Error", err)
	}
	want := annotation.Error{Name: "lb.example.com/idle-timeout", Value: "soon", Expected: `a non-negative duration such as "30s" or "1m30s"`}
	if diff := cmp.Diff(want, *ae, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Err" }, cmp.Ignore())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if ae.Unwrap() == nil {
		t.Errorf("Unwrap() = nil; want the time.ParseDuration error")
	}
}

// TestExpected: Expected words what each kind accepts, and it is the
// Expected of the *Error a malformed value makes (package admission builds
// its messages from it).
func TestExpected(t *testing.T) {
	_, k := testAnnotations(t)
	for _, tc := range []struct {
		name, reason string
		kind         annotation.Kind
		want         string
	}{
		{name: "bool", reason: "exactly two words", kind: annotation.KindBool, want: `"true" or "false"`},
		{name: "int", reason: "a bounded int says its bounds", kind: annotation.KindInt, want: "an integer from 1 to 100000"},
		{name: "duration", reason: "an example of a Go duration", kind: annotation.KindDuration, want: `a non-negative duration such as "30s" or "1m30s"`},
		{name: "enum", reason: "the values, quoted, in declared order", kind: annotation.KindEnum, want: `one of "round-robin", "least-connections"`},
		{name: "IP", reason: "either family", kind: annotation.KindIP, want: "an IPv4 or IPv6 address"},
		{name: "CIDR list", reason: "an example list", kind: annotation.KindCIDRList, want: `a comma-separated list of CIDRs such as "10.0.0.0/8,2001:db8::/32"`},
		{name: "string", reason: "anything but blank", kind: annotation.KindString, want: "a non-empty string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := k[tc.kind]
			if diff := cmp.Diff(tc.want, a.Expected()); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			_, _, err := a.Canonical(map[string]string{a.Name: " "})
			ae, ok := errors.AsType[*annotation.Error](err)
			if !ok {
				t.Fatalf("Canonical of a blank value: error %v; want an *annotation.Error", err)
			}
			if diff := cmp.Diff(a.Expected(), ae.Expected); diff != "" {
				t.Errorf("Error.Expected is not Expected() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnnotationErrorIsBounded: a 1 MiB malformed annotation gives an error
// (and so an event, a log line) of bounded size that still names the
// annotation, the start of the value, its length and what was expected.
func TestAnnotationErrorIsBounded(t *testing.T) {
	_, k := testAnnotations(t)
	huge := "é" + strings.Repeat("x", 1<<20)
	_, _, err := k[annotation.KindDuration].Duration(map[string]string{"lb.example.com/idle-timeout": huge})
	if err == nil {
		t.Fatal("a 1 MiB malformed duration was accepted")
	}
	msg := err.Error()
	if len(msg) > 1024 || !strings.Contains(msg, "lb.example.com/idle-timeout") || !strings.Contains(msg, fmt.Sprintf("(%d bytes)", len(huge))) ||
		!strings.Contains(msg, "a non-negative duration") || !utf8.ValidString(msg) {
		t.Errorf("error for a 1 MiB value is %d bytes: %.300q…; want at most 1 KiB, valid UTF-8, naming the annotation, the value's length and what was expected", len(msg), msg)
	}
}

func TestDeclareErrors(t *testing.T) {
	cases := []struct {
		name, reason string
		a            annotation.Annotation
		wantSubstr   string
	}{
		{"bad name", "keys are qualified names", annotation.Annotation{Name: "not a key", Kind: annotation.KindBool, Doc: "d"}, `Annotation.Name "not a key"`},
		{"duplicate", "one declaration per key", annotation.Annotation{Name: "x.io/dup", Kind: annotation.KindBool, Doc: "d"}, "already declared"},
		{"unknown kind", "kinds are closed", annotation.Annotation{Name: "x.io/k", Kind: "float", Doc: "d"}, `Kind "float"`},
		{"no doc", "the reference needs it", annotation.Annotation{Name: "x.io/d", Kind: annotation.KindBool}, "Doc is empty"},
		{"empty enum", "an enum needs values", annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Doc: "d"}, "Values is empty"},
		{"duplicate enum value", "values are unique", annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{"a", "a"}, Doc: "d"}, `Values[1] "a"`},
		{"values on bool", "only enums have values", annotation.Annotation{Name: "x.io/b", Kind: annotation.KindBool, Values: []string{"a"}, Doc: "d"}, "expected none for kind bool"},
		{"bounds on duration", "only ints have bounds", annotation.Annotation{Name: "x.io/b", Kind: annotation.KindDuration, Max: 3, Doc: "d"}, "expected none for kind duration"},
		{"min > max", "empty range", annotation.Annotation{Name: "x.io/b", Kind: annotation.KindInt, Min: 3, Max: 1, Doc: "d"}, "Min 3 > Max 1"},
		{"bad default", "the default must parse", annotation.Annotation{Name: "x.io/b", Kind: annotation.KindInt, Default: "ten", Doc: "d"}, `annotation "x.io/b": Default: annotation "x.io/b": invalid value "ten"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var set annotation.Set
			set.MustDeclare(annotation.Annotation{Name: "x.io/dup", Kind: annotation.KindBool, Doc: "d"})
			_, err := set.Declare(tc.a)
			if err == nil || !strings.Contains(err.Error(), tc.wantSubstr) || !strings.HasPrefix(err.Error(), "annotation.Set.Declare: ") {
				t.Errorf("%s: Declare error = %v; want it to start with annotation.Set.Declare and contain %q", tc.reason, err, tc.wantSubstr)
			}
			if _, ok := set.Lookup(tc.a.Name); ok && tc.a.Name != "x.io/dup" {
				t.Errorf("%s: a rejected annotation was added", tc.reason)
			}
		})
	}
}

func TestMustDeclarePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("MustDeclare of an invalid annotation did not panic")
		}
	}()
	var set annotation.Set
	set.MustDeclare(annotation.Annotation{Name: "bad name"})
}

// TestValidateJoinsAll: Validate reports every malformed declared
// annotation, PerPort ones included, and ignores the others.
func TestValidateJoinsAll(t *testing.T) {
	plain, _ := testAnnotations(t)
	perPort, _ := perPortAnnotations(t)
	for _, tc := range []struct {
		name, reason string
		set          *annotation.Set
		bad, good    map[string]string
		want         []string
	}{
		{name: "plain", reason: "each malformed one, by name", set: plain,
			bad: map[string]string{
				"lb.example.com/proxy-protocol": "maybe",
				"lb.example.com/ip":             "1.2.3",
				"lb.example.com/algorithm":      "round-robin",
				"other.io/x":                    "not declared: ignored",
			},
			good: map[string]string{"lb.example.com/algorithm": "least-connections"},
			want: []string{"lb.example.com/ip=1.2.3", "lb.example.com/proxy-protocol=maybe"}},
		{name: "per port", reason: "PerPort values are parsed as such", set: perPort,
			bad: map[string]string{
				"lb.example.com/proxy-protocol-ports":  "80=true,80=false",
				"lb.example.com/ip-ports":              "80=10.0.0.1",
				"lb.example.com/max-connections-ports": "true",
			},
			good: map[string]string{"lb.example.com/ip-ports": "80=10.0.0.1, https=::1"},
			want: []string{"lb.example.com/max-connections-ports=true", "lb.example.com/proxy-protocol-ports=80=true,80=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, invalid(tc.set.Validate(tc.bad))); diff != "" {
				t.Errorf("%s: Validate reported (-want +got):\n%s", tc.reason, diff)
			}
			if err := tc.set.Validate(tc.good); err != nil {
				t.Errorf("%s: Validate(valid) = %v; want nil", tc.reason, err)
			}
		})
	}
}

// invalid returns "name=value" of each *Error that err, from Validate,
// joins, in order.
func invalid(err error) []string {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil
	}
	var got []string
	for _, e := range joined.Unwrap() {
		if ae, ok := errors.AsType[*annotation.Error](e); ok {
			got = append(got, ae.Name+"="+ae.Value)
		}
	}
	return got
}

func TestCanonical(t *testing.T) {
	_, k := testAnnotations(t)
	cases := []struct {
		name, reason string
		a            *annotation.Annotation
		m            map[string]string
		want         string
		wantSet      bool
	}{
		{"absent with default", "the canonical default", k[annotation.KindDuration], nil, "1m0s", false},
		{"absent without default", "empty", k[annotation.KindIP], nil, "", false},
		{"duration", "time.Duration.String", k[annotation.KindDuration], map[string]string{"lb.example.com/idle-timeout": "90s"}, "1m30s", true},
		{"cidrs", "sorted, comma-joined", k[annotation.KindCIDRList], map[string]string{"lb.example.com/internal-ranges": "::/0, 10.0.0.1/8"}, "10.0.0.0/8,::/0", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, set, err := tc.a.Canonical(tc.m)
			if err != nil || got != tc.want || set != tc.wantSet {
				t.Errorf("%s: Canonical = %q, %v, %v; want %q, %v, nil", tc.reason, got, set, err, tc.want, tc.wantSet)
			}
		})
	}
}

func TestWriteMarkdownGolden(t *testing.T) {
	set, _ := testAnnotations(t)
	var buf bytes.Buffer
	if err := set.WriteMarkdown(&buf, "Example provider annotations"); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "annotations.md")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestWriteMarkdownGolden -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("Markdown differs from %s (-want +got); run with -update if intended:\n%s", golden, diff)
	}
}

func TestWriteMarkdownEmpty(t *testing.T) {
	var set annotation.Set
	var buf bytes.Buffer
	if err := set.WriteMarkdown(&buf, "None"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("# None\n\nNo annotations are declared.\n", buf.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// FuzzAnnotationParse checks, for every kind, that parsing never panics,
// that a rejected value is an *Error naming the annotation and the
// value, and that an accepted value's canonical form parses to itself.
func FuzzAnnotationParse(f *testing.F) {
	for _, s := range []string{"true", "false", " 42 ", "-1", "9223372036854775808", "1m30s", "-1s", "round-robin",
		"10.0.0.1", "::ffff:1.2.3.4", "fe80::1%eth0", "10.0.0.0/8,::/0", "10.0.0.0/8,", ",", "", " ", "\x00", "a\tb", " a\n", "\u202eab", "a\u0085"} {
		f.Add(s)
	}
	set, _ := testAnnotations(f)
	f.Fuzz(func(t *testing.T, v string) { checkParse(t, set, v) })
}

// checkParse fails t unless, for every annotation of set, value v is
// reported set, and is either refused with an *Error naming the
// annotation and v or has a canonical form that parses to itself.
func checkParse(t *testing.T, set *annotation.Set, v string) {
	t.Helper()
	for _, a := range set.All() {
		c, isSet, err := a.Canonical(map[string]string{a.Name: v})
		if !isSet {
			t.Fatalf("%s: present value reported as not set", a.Name)
		}
		if err != nil {
			var ae *annotation.Error
			if !errors.As(err, &ae) || ae.Name != a.Name || ae.Value != v || !errors.Is(err, annotation.ErrInvalid) {
				t.Fatalf("%s: value %q: error %#v does not name the annotation and value", a.Name, v, err)
			}
			continue
		}
		for name, h := range hiddenCharacters {
			if a.Kind == annotation.KindString && strings.Contains(c, h) {
				t.Fatalf("%s: value %q: canonical %q holds %s", a.Name, v, c, name)
			}
		}
		c2, _, err := a.Canonical(map[string]string{a.Name: c})
		if err != nil || c2 != c {
			t.Fatalf("%s: value %q: canonical %q re-parses to %q, %v", a.Name, v, c, c2, err)
		}
	}
}
