package annotation_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/annotation"
)

// perPortAnnotations declares a PerPort copy of each annotation of the
// shared fixture (testAnnotations) that can be per port (all but the CIDR
// list), named after it with "-ports", and returns the set and the
// annotations by kind.
func perPortAnnotations(t testing.TB) (*annotation.Set, map[annotation.Kind]*annotation.Annotation) {
	t.Helper()
	_, plain := testAnnotations(t)
	set := &annotation.Set{}
	byKind := map[annotation.Kind]*annotation.Annotation{}
	for kind, a := range plain {
		if kind != annotation.KindCIDRList {
			perPort := *a
			perPort.Name += "-ports"
			perPort.PerPort = true
			byKind[kind] = set.MustDeclare(perPort)
		}
	}
	return set, byKind
}

// boolPortsExpected is Expected() of the bool PerPort annotation.
const boolPortsExpected = `comma-separated PORT=VALUE entries such as "443=true,https=false", each PORT a port number or name (a DNS-1123 label) listed once, and each VALUE "true" or "false"`

// TestPorts: Ports parses PORT=VALUE entries, each VALUE as its kind does,
// keyed by PORT as written; every malformed value is an *Error naming the
// entry at fault after what was expected.
func TestPorts(t *testing.T) {
	_, k := perPortAnnotations(t)
	boolErr := func(value, detail string) string {
		if detail != "" {
			detail = ": " + detail
		}
		return `annotation "lb.example.com/proxy-protocol-ports": invalid value ` + value + `: expected ` + boolPortsExpected + detail
	}
	cases := []struct {
		name, reason string
		kind         annotation.Kind
		value        string
		want         map[string]string
		wantErr      string
	}{
		{name: "number and name", reason: "a port by number, another by name", kind: annotation.KindBool, value: "443=true,https=false",
			want: map[string]string{"443": "true", "https": "false"}},
		{name: "white space", reason: "around entries, ports and values", kind: annotation.KindBool, value: " 443 = true ,\thttps=\nfalse ",
			want: map[string]string{"443": "true", "https": "false"}},
		{name: "edges of numbers", reason: "1 and 65535", kind: annotation.KindBool, value: "1=true,65535=false", want: map[string]string{"1": "true", "65535": "false"}},
		{name: "digits that are names", reason: "a leading zero or more than 65535 is no number, but a DNS-1123 label", kind: annotation.KindBool, value: "0443=true,70000=false,0=true",
			want: map[string]string{"0443": "true", "70000": "false", "0": "true"}},
		{name: "longest name", reason: "a DNS-1123 label has at most 63 characters", kind: annotation.KindBool, value: strings.Repeat("a", 63) + "=true",
			want: map[string]string{strings.Repeat("a", 63): "true"}},
		{name: "int canonical", reason: "each VALUE canonical", kind: annotation.KindInt, value: "80=+0042,http=100000", want: map[string]string{"80": "42", "http": "100000"}},
		{name: "duration canonical", reason: "time.Duration.String", kind: annotation.KindDuration, value: "80=90s", want: map[string]string{"80": "1m30s"}},
		{name: "enum", reason: "one of Values", kind: annotation.KindEnum, value: "80=least-connections", want: map[string]string{"80": "least-connections"}},
		{name: "IP canonical", reason: "netip's form", kind: annotation.KindIP, value: "80=2001:DB8::0001", want: map[string]string{"80": "2001:db8::1"}},
		{name: "string with =", reason: "PORT ends at the first =", kind: annotation.KindString, value: "https=a=b", want: map[string]string{"https": "a=b"}},

		{name: "empty", reason: "no entry at all", kind: annotation.KindBool, value: "", wantErr: boolErr(`""`, "")},
		{name: "blank", reason: "white space is no entry", kind: annotation.KindBool, value: " \t", wantErr: boolErr(`" \t"`, "")},
		{name: "empty entry", reason: ",, leaves an entry empty", kind: annotation.KindBool, value: "80=true,,443=true", wantErr: boolErr(`"80=true,,443=true"`, "entry 2 is empty")},
		{name: "trailing comma", reason: "an empty last entry", kind: annotation.KindBool, value: "80=true, ", wantErr: boolErr(`"80=true, "`, "entry 2 is empty")},
		{name: "no =", reason: "a plain value is not per port", kind: annotation.KindBool, value: "true", wantErr: boolErr(`"true"`, `entry 1 "true" has no "="`)},
		{name: "no PORT", reason: "an empty PORT", kind: annotation.KindBool, value: " = true", wantErr: boolErr(`" = true"`, `entry 1 has PORT ""`)},
		{name: "upper-case PORT", reason: "a DNS-1123 label is lower case", kind: annotation.KindBool, value: "80=true,HTTPS=true", wantErr: boolErr(`"80=true,HTTPS=true"`, `entry 2 has PORT "HTTPS"`)},
		{name: "signed PORT", reason: "no sign", kind: annotation.KindBool, value: "+443=true", wantErr: boolErr(`"+443=true"`, `entry 1 has PORT "+443"`)},
		{name: "negative PORT", reason: "no sign, and no label starts with -", kind: annotation.KindBool, value: "-1=true", wantErr: boolErr(`"-1=true"`, `entry 1 has PORT "-1"`)},
		{name: "long PORT", reason: "64 characters", kind: annotation.KindBool, value: strings.Repeat("a", 64) + "=true",
			wantErr: boolErr(`"`+strings.Repeat("a", 64)+`=true"`, `entry 1 has PORT "`+strings.Repeat("a", 64)+`"`)},
		{name: "bad VALUE", reason: "the entry and what the kind expects", kind: annotation.KindBool, value: "443=true, https = maybe ",
			wantErr: boolErr(`"443=true, https = maybe "`, `entry 2 has VALUE "maybe"`)},
		{name: "empty VALUE", reason: "an empty value is no bool", kind: annotation.KindBool, value: "443=", wantErr: boolErr(`"443="`, `entry 1 has VALUE ""`)},
		{name: "same PORT twice", reason: "the first repeated PORT, its first and last entries", kind: annotation.KindBool, value: "80=true,443=true,80=false,443=true,80=true",
			wantErr: boolErr(`"80=true,443=true,80=false,443=true,80=true"`, `entries 1 and 5 have PORT "80"`)},
		{name: "syntax before duplicates", reason: "every entry is parsed before PORTs are compared", kind: annotation.KindBool, value: "80=true,80=true,x=maybe",
			wantErr: boolErr(`"80=true,80=true,x=maybe"`, `entry 3 has VALUE "maybe"`)},
		{name: "first problem", reason: "entries in order", kind: annotation.KindBool, value: "80=yes,,x",
			wantErr: boolErr(`"80=yes,,x"`, `entry 1 has VALUE "yes"`)},
		{name: "int out of range", reason: "the bounds", kind: annotation.KindInt, value: "80=0",
			wantErr: `annotation "lb.example.com/max-connections-ports": invalid value "80=0": expected comma-separated PORT=VALUE entries such as "443=1,https=100000", each PORT a port number or name (a DNS-1123 label) listed once, and each VALUE an integer from 1 to 100000: entry 1 has VALUE "0"`},
		{name: "negative duration", reason: "not negative", kind: annotation.KindDuration, value: "80=-1s",
			wantErr: `annotation "lb.example.com/idle-timeout-ports": invalid value "80=-1s": expected comma-separated PORT=VALUE entries such as "443=30s,https=1m30s", each PORT a port number or name (a DNS-1123 label) listed once, and each VALUE a non-negative duration such as "30s" or "1m30s": entry 1 has VALUE "-1s"`},
		{name: "enum value", reason: "exact values", kind: annotation.KindEnum, value: "80=Round-Robin",
			wantErr: `annotation "lb.example.com/algorithm-ports": invalid value "80=Round-Robin": expected comma-separated PORT=VALUE entries such as "443=round-robin,https=least-connections", each PORT a port number or name (a DNS-1123 label) listed once, and each VALUE one of "round-robin", "least-connections": entry 1 has VALUE "Round-Robin"`},
		{name: "IP zone", reason: "no zone", kind: annotation.KindIP, value: "80=fe80::1%eth0",
			wantErr: `annotation "lb.example.com/ip-ports": invalid value "80=fe80::1%eth0": expected comma-separated PORT=VALUE entries such as "443=10.0.0.1,https=2001:db8::1", each PORT a port number or name (a DNS-1123 label) listed once, and each VALUE an IPv4 or IPv6 address: entry 1 has VALUE "fe80::1%eth0"`},
		{name: "blank string", reason: "a string is not blank", kind: annotation.KindString, value: "https= ",
			wantErr: `annotation "lb.example.com/id-ports": invalid value "https= ": expected comma-separated PORT=VALUE entries such as "443=a,https=b", each PORT a port number or name (a DNS-1123 label) listed once, and each VALUE a non-empty string: entry 1 has VALUE ""`},
		{name: "quoted and cut", reason: "an entry is quoted as a value is, cut at 256 bytes", kind: annotation.KindBool, value: "80=true,\"" + strings.Repeat("x", 300),
			wantErr: boolErr(`"80=true,\"`+strings.Repeat("x", 247)+`… (309 bytes)"`, `entry 2 "\"`+strings.Repeat("x", 255)+`… (301 bytes)" has no "="`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := k[tc.kind]
			got, set, err := a.Ports(map[string]string{a.Name: tc.value, "unrelated": "x"})
			if !set {
				t.Errorf("%s: set = false for a present annotation", tc.reason)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: Ports (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantErr, errText(err)); diff != "" {
				t.Errorf("%s: error (-want +got):\n%s", tc.reason, diff)
			}
			if err != nil {
				ae, ok := errors.AsType[*annotation.Error](err)
				if !ok || !errors.Is(err, annotation.ErrInvalid) || ae.Name != a.Name || ae.Value != tc.value || !strings.HasPrefix(ae.Expected, a.Expected()) {
					t.Errorf("%s: error %#v is not an *Error naming the annotation and value, whose Expected starts with Expected()", tc.reason, err)
				}
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestPortsBadValueUnwraps: the *Error of a bad VALUE wraps its parser's
// error, as the error of a plain value does.
func TestPortsBadValueUnwraps(t *testing.T) {
	_, k := perPortAnnotations(t)
	a := k[annotation.KindDuration]
	_, _, err := a.Ports(map[string]string{a.Name: "80=soon"})
	ae, ok := errors.AsType[*annotation.Error](err)
	if !ok || ae.Unwrap() == nil {
		t.Errorf("error %v: want an *Error wrapping the time.ParseDuration error", err)
	}
}

// TestPortsAbsentAndWrongKind: an absent PerPort annotation is not set
// (its Default applies to every port); Ports on an annotation that is not
// per port, and a typed getter on one that is, are errors naming it.
func TestPortsAbsentAndWrongKind(t *testing.T) {
	_, k := perPortAnnotations(t)
	_, plain := testAnnotations(t)
	ports := k[annotation.KindBool]
	m, set, err := ports.Ports(map[string]string{"other": "80=true"})
	if m != nil || set || err != nil {
		t.Errorf("Ports of an absent annotation = %v, %v, %v; want nil, false, nil", m, set, err)
	}
	if ports.Default != "false" {
		t.Errorf("Default = %q; want \"false\", the value of every port not listed", ports.Default)
	}
	timeout := (&annotation.Set{}).MustDeclare(annotation.Annotation{Name: "x.io/t", Kind: annotation.KindDuration, Default: " 60s ", PerPort: true, Doc: "d"})
	if timeout.Default != "1m0s" {
		t.Errorf("Default = %q; want the canonical plain value \"1m0s\"", timeout.Default)
	}
	for _, tc := range []struct {
		name, reason string
		call         func() error
		want         string
	}{
		{name: "Ports on a plain annotation", reason: "it has one value for every port",
			call: func() error { _, _, err := plain[annotation.KindBool].Ports(nil); return err },
			want: `annotation "lb.example.com/proxy-protocol" is declared as bool, not bool per port`},
		{name: "Bool on a PerPort annotation", reason: "it has a value per port",
			call: func() error {
				_, _, err := ports.Bool(map[string]string{ports.Name: "80=true"})
				return err
			},
			want: `annotation "lb.example.com/proxy-protocol-ports" is declared as bool per port, not bool`},
		{name: "Int on a PerPort annotation", reason: "the same for every typed getter",
			call: func() error { _, _, err := k[annotation.KindInt].Int(nil); return err },
			want: `annotation "lb.example.com/max-connections-ports" is declared as int per port, not int`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if diff := cmp.Diff(tc.want, errText(err)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if errors.Is(err, annotation.ErrInvalid) {
				t.Errorf("%s: a kind mismatch is the caller's mistake, not ErrInvalid", tc.reason)
			}
		})
	}
}

// TestPortsCanonical: the canonical form sorts the entries (numbers
// ascending, then names in byte order), each VALUE canonical, without
// white space; Canonical of an absent annotation is its plain Default.
func TestPortsCanonical(t *testing.T) {
	_, k := perPortAnnotations(t)
	for _, tc := range []struct {
		name, reason string
		kind         annotation.Kind
		value        *string
		want         string
		wantSet      bool
	}{
		{name: "sorted", reason: "numbers ascending before names in byte order", kind: annotation.KindBool,
			value: ptr(" https=true , 8080 = false,443=true,0443=false,admin=true,80=false"), want: "80=false,443=true,8080=false,0443=false,admin=true,https=true", wantSet: true},
		{name: "numerically", reason: "9 before 10", kind: annotation.KindBool, value: ptr("10=true,9=true"), want: "9=true,10=true", wantSet: true},
		{name: "values canonical", reason: "as a plain value's", kind: annotation.KindDuration, value: ptr("http=90s,443=1h0m"), want: "443=1h0m0s,http=1m30s", wantSet: true},
		{name: "absent", reason: "the Default, one value for every port", kind: annotation.KindDuration, want: "1m0s"},
		{name: "absent without default", reason: "empty", kind: annotation.KindIP, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := k[tc.kind]
			m := map[string]string{}
			if tc.value != nil {
				m[a.Name] = *tc.value
			}
			got, set, err := a.Canonical(m)
			if err != nil || got != tc.want || set != tc.wantSet {
				t.Errorf("%s: Canonical = %q, %v, %v; want %q, %v, nil", tc.reason, got, set, err, tc.want, tc.wantSet)
			}
		})
	}
}

// TestDeclarePerPortErrors: what cannot be per port is refused, naming
// the annotation and why; a PerPort annotation's Default is one value.
func TestDeclarePerPortErrors(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		a            annotation.Annotation
		want         string
	}{
		{name: "CIDR list", reason: "its values contain commas", a: annotation.Annotation{Name: "x.io/ranges", Kind: annotation.KindCIDRList, PerPort: true, Doc: "d"},
			want: `annotation.Set.Declare: annotation "x.io/ranges": PerPort with Kind CIDR list: expected a kind whose values hold no comma (commas separate the entries of a per-port value)`},
		{name: "enum value with a comma", reason: "no entry could hold it", a: annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{"a", "b,c"}, PerPort: true, Doc: "d"},
			want: `annotation.Set.Declare: annotation "x.io/e": Values[1] "b,c": expected no comma in the values of a PerPort enum (commas separate its entries)`},
		{name: "per-port Default", reason: "the Default is one value, for every port not listed", a: annotation.Annotation{Name: "x.io/b", Kind: annotation.KindBool, Default: "80=true", PerPort: true, Doc: "d"},
			want: `annotation.Set.Declare: annotation "x.io/b": Default: annotation "x.io/b": invalid value "80=true": expected "true" or "false"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var set annotation.Set
			_, err := set.Declare(tc.a)
			if diff := cmp.Diff(tc.want, errText(err)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if _, ok := set.Lookup(tc.a.Name); ok {
				t.Errorf("%s: a refused annotation was added", tc.reason)
			}
		})
	}
	var set annotation.Set
	if _, err := set.Declare(annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{"a=b", "c"}, PerPort: true, Doc: "d"}); err != nil {
		t.Errorf("an enum value with = is refused: %v; want it declared (PORT ends at the first =)", err)
	}
}

// TestExpectedPerPort: Expected names the syntax with an example of the
// kind (which parses) and what each VALUE must be, and it is the Expected
// of the *Error of a blank value.
func TestExpectedPerPort(t *testing.T) {
	_, k := perPortAnnotations(t)
	if diff := cmp.Diff(boolPortsExpected, k[annotation.KindBool].Expected()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	unbounded := (&annotation.Set{}).MustDeclare(annotation.Annotation{Name: "x.io/w", Kind: annotation.KindInt, PerPort: true, Doc: "d"})
	extreme := (&annotation.Set{}).MustDeclare(annotation.Annotation{Name: "x.io/x", Kind: annotation.KindInt, Min: math.MinInt64, Max: math.MaxInt64, PerPort: true, Doc: "d"})
	all := []*annotation.Annotation{unbounded, extreme}
	for _, a := range k {
		all = append(all, a)
	}
	for _, a := range all {
		exp := a.Expected()
		example, ok := strings.CutPrefix(exp, `comma-separated PORT=VALUE entries such as "`)
		example, _, _ = strings.Cut(example, `"`)
		if !ok {
			t.Errorf("%s: Expected %q does not start with the syntax", a.Name, exp)
			continue
		}
		if c, _, err := a.Canonical(map[string]string{a.Name: example}); err != nil || c != example {
			t.Errorf("%s: the example %q is not a canonical value: %q, %v", a.Name, example, c, err)
		}
		_, _, err := a.Canonical(map[string]string{a.Name: " "})
		if ae, ok := errors.AsType[*annotation.Error](err); !ok || ae.Expected != exp {
			t.Errorf("%s: error of a blank value %v: want an *Error whose Expected is Expected()", a.Name, err)
		}
	}
}

// TestWriteMarkdownPerPort: a PerPort annotation's entry says it is per
// port, shows the syntax with an example of its kind, and gives the
// default of every port not listed.
func TestWriteMarkdownPerPort(t *testing.T) {
	set := &annotation.Set{}
	set.MustDeclare(annotation.Annotation{Name: "lb.example.com/proxy-protocol-ports", Kind: annotation.KindBool, Default: "false", PerPort: true, Setting: true, Doc: "Send the PROXY protocol header, per port."})
	set.MustDeclare(annotation.Annotation{Name: "lb.example.com/port-timeouts", Kind: annotation.KindDuration, PerPort: true, Doc: "Idle timeout per port."})
	var buf bytes.Buffer
	if err := set.WriteMarkdown(&buf, "Per port"); err != nil {
		t.Fatal(err)
	}
	want := "# Per port\n\n" +
		"| Annotation | Type | Default |\n|---|---|---|\n" +
		"| [`lb.example.com/port-timeouts`](#lbexamplecomport-timeouts) | duration per port | none for every port not listed |\n" +
		"| [`lb.example.com/proxy-protocol-ports`](#lbexamplecomproxy-protocol-ports) | bool per port | `false` for every port not listed |\n" +
		"\n## `lb.example.com/port-timeouts`\n\n" +
		"- Type: duration per port\n" +
		"- Syntax: `PORT=VALUE,PORT=VALUE,…` (PORT a Service port's number or name), for example `443=30s,https=1m30s`\n" +
		"- Accepted values: comma-separated PORT=VALUE entries such as \"443=30s,https=1m30s\", each PORT a port number or name (a DNS-1123 label) listed once, and each VALUE a non-negative duration such as \"30s\" or \"1m30s\"\n" +
		"- Default: none for every port not listed\n" +
		"\nIdle timeout per port.\n" +
		"\n## `lb.example.com/proxy-protocol-ports`\n\n" +
		"- Type: bool per port\n" +
		"- Syntax: `PORT=VALUE,PORT=VALUE,…` (PORT a Service port's number or name), for example `443=true,https=false`\n" +
		"- Accepted values: " + boolPortsExpected + "\n" +
		"- Default: `false` for every port not listed\n" +
		"- Provider setting: changing it updates the load balancer\n" +
		"\nSend the PROXY protocol header, per port.\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// FuzzPerPortCanonical checks, for every kind that can be per port, that
// parsing a PerPort value never panics, that a rejected value is an *Error
// naming the annotation and the value, and that the canonical form of an
// accepted value is its own canonical form (checkParse).
func FuzzPerPortCanonical(f *testing.F) {
	for _, s := range []string{"443=true,https=false", " 80 = 42 , http=1 ", "0443=1m30s,443=90s", "a=b=c", "80=round-robin,81=least-connections",
		"80=::ffff:1.2.3.4", "80=10.0.0.1,80=10.0.0.2", "1=x,65535=y,65536=z", "=x", ",", "", " ", "x", "80=,", "\x00=\x00", "é=1"} {
		f.Add(s)
	}
	set, _ := perPortAnnotations(f)
	f.Fuzz(func(t *testing.T, v string) { checkParse(t, set, v) })
}
