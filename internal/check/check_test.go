package check

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ccmkit/ccmkit/internal/clip"
)

type impl struct{}

func (*impl) M() {}

type iface interface{ M() }

func TestIsNil(t *testing.T) {
	var nilPtr *impl
	var nilIface iface
	var typedNil iface = nilPtr
	for _, tc := range []struct {
		name   string
		v      any
		want   bool
		reason string
	}{
		{name: "untyped nil", v: nil, want: true, reason: "a nil interface holds nothing"},
		{name: "nil interface variable", v: nilIface, want: true, reason: "converting a nil interface to any is still nil"},
		{name: "typed nil pointer", v: typedNil, want: true, reason: "methods on a typed nil would see a nil receiver"},
		{name: "nil map", v: map[string]int(nil), want: true, reason: "a nil map is nil"},
		{name: "nil func", v: (func())(nil), want: true, reason: "calling it would panic"},
		{name: "pointer", v: &impl{}, want: false, reason: "a real value"},
		{name: "struct value", v: impl{}, want: false, reason: "a struct value is never nil"},
		{name: "zero int", v: 0, want: false, reason: "zero is not nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsNil(tc.v); got != tc.want {
				t.Errorf("IsNil(%#v) = %v, want %v: %s", tc.v, got, tc.want, tc.reason)
			}
		})
	}
}

func TestDriver(t *testing.T) {
	var nilPtr *impl
	for _, tc := range []struct {
		name   string
		d      any
		want   string
		reason string
	}{
		{name: "usable", d: &impl{}, want: "", reason: "a usable driver passes"},
		{name: "nil", d: nil, want: "pkg.New: driver is nil: expected a non-nil pkg.Driver", reason: "one wording for every constructor"},
		{name: "typed nil", d: nilPtr, want: "pkg.New: driver is a nil *check.impl: expected a non-nil pkg.Driver", reason: "a typed nil names its type, so the caller finds the variable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Driver("pkg.New", tc.d, "pkg.Driver")
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Driver error (-want +got):\n%s\n%s", diff, tc.reason)
			}
		})
	}
}

func TestField(t *testing.T) {
	path := field.NewPath("spec", "name")
	if errs := Field(path, "web", validation.IsDNS1123Subdomain, "expected a DNS-1123 subdomain"); errs != nil {
		t.Errorf("Field(valid) = %v; want nil", errs)
	}
	long := strings.Repeat("A", 10_000)
	errs := Field(path, long, validation.IsDNS1123Subdomain, "expected a DNS-1123 subdomain")
	if len(errs) != 1 {
		t.Fatalf("Field(invalid) = %v; want one error", errs)
	}
	msg := errs[0].Error()
	for _, want := range []string{"spec.name", "expected a DNS-1123 subdomain: ", "(10000 bytes)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Field(invalid) = %q; want it to contain %q", msg, want)
		}
	}
	if len(msg) > 2*clip.MaxQuoted+500 {
		t.Errorf("Field(invalid) is %d bytes; want the value cut to clip.MaxQuoted", len(msg))
	}
}
