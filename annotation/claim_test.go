package annotation_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/annotation"
)

// claimedSet declares a few annotations under lb.example.com/ and claims
// that prefix.
func claimedSet(t testing.TB) *annotation.Set {
	t.Helper()
	set := &annotation.Set{}
	for _, n := range []string{"health-check", "health-check-interval", "algorithm", "id", "Mixed-Case"} {
		set.MustDeclare(annotation.Annotation{Name: "lb.example.com/" + n, Kind: annotation.KindString, Doc: "d"})
	}
	set.MustDeclare(annotation.Annotation{Name: "other.example.com/x", Kind: annotation.KindString, Doc: "d"})
	set.MustClaimPrefix("lb.example.com/")
	return set
}

// TestClaimPrefixErrors: what cannot be claimed, named with what was
// expected.
func TestClaimPrefixErrors(t *testing.T) {
	const want = `expected the start of a qualified name up to and including the "/" after its DNS prefix, such as "lb.example.com/" or "service.beta.kubernetes.io/acme-"`
	for _, tc := range []struct {
		name, reason, prefix, want string
	}{
		{name: "empty", reason: "no prefix at all", prefix: "", want: `annotation.Set.ClaimPrefix: prefix "": ` + want},
		{name: "no slash", reason: "a DNS prefix alone would claim names of other domains", prefix: "lb.example.com", want: `annotation.Set.ClaimPrefix: prefix "lb.example.com": ` + want},
		{name: "upper case", reason: "a qualified name's DNS prefix is lower case (apimachinery's words follow)",
			prefix: "LB.example.com/", want: `annotation.Set.ClaimPrefix: prefix "LB.example.com/": ` + want + `, followed by a name: prefix part a lowercase RFC 1123 subdomain`},
		{name: "two slashes", reason: "a name has one (apimachinery's words follow)", prefix: "lb.example.com/a/",
			want: `annotation.Set.ClaimPrefix: prefix "lb.example.com/a/": ` + want + `, followed by a name: a valid label key must consist of`},
		{name: "Kubernetes' domain", reason: "shared by every provider", prefix: "service.beta.kubernetes.io/",
			want: `annotation.Set.ClaimPrefix: prefix "service.beta.kubernetes.io/": expected a prefix this provider alone uses, such as "service.beta.kubernetes.io/acme-" (Kubernetes and other providers annotate under "service.beta.kubernetes.io/")`},
		{name: "k8s.io", reason: "likewise", prefix: "k8s.io/",
			want: `annotation.Set.ClaimPrefix: prefix "k8s.io/": expected a prefix this provider alone uses, such as "k8s.io/acme-" (Kubernetes and other providers annotate under "k8s.io/")`},
		{name: "twice", reason: "one claim per prefix", prefix: "lb.example.com/",
			want: `annotation.Set.ClaimPrefix: prefix "lb.example.com/": already claimed by this set: expected each prefix claimed once`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := claimedSet(t)
			got := errText(set.ClaimPrefix(tc.prefix))
			if strings.HasSuffix(tc.want, " of") || strings.HasSuffix(tc.want, "subdomain") {
				got = got[:min(len(got), len(tc.want))]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff([]string{"lb.example.com/"}, set.Prefixes()); diff != "" {
				t.Errorf("%s: a refused prefix was claimed (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Errorf("MustClaimPrefix of an invalid prefix did not panic")
		}
	}()
	new(annotation.Set).MustClaimPrefix("")
}

// TestPrefixes: sorted, a copy, nil for a nil set or none claimed; a
// name prefix within a shared domain can be claimed.
func TestPrefixes(t *testing.T) {
	var none *annotation.Set
	if got := none.Prefixes(); got != nil {
		t.Errorf("Prefixes of a nil set = %q; want nil", got)
	}
	var set annotation.Set
	if got := set.Prefixes(); got != nil {
		t.Errorf("Prefixes of a set without claims = %q; want nil", got)
	}
	for _, p := range []string{"service.beta.kubernetes.io/acme-", "acme.example.com/", "acme.example.com/lb-"} {
		if err := set.ClaimPrefix(p); err != nil {
			t.Fatalf("ClaimPrefix(%q): %v", p, err)
		}
	}
	got := set.Prefixes()
	want := []string{"acme.example.com/", "acme.example.com/lb-", "service.beta.kubernetes.io/acme-"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prefixes (-want +got):\n%s", diff)
	}
	got[0] = "changed"
	if set.Prefixes()[0] != want[0] {
		t.Errorf("Prefixes returned the set's own slice")
	}
}

// TestValidateUndeclared: under a claimed prefix (whatever the case of
// the prefix), an annotation that is not declared is an *Error naming it
// and the declared annotation it most likely means; outside claimed
// prefixes every undeclared annotation is ignored, even a declared name
// but for case.
func TestValidateUndeclared(t *testing.T) {
	set := claimedSet(t)
	for _, tc := range []struct {
		name, reason string
		key          string
		want         string // "" when ignored
	}{
		{name: "misspelt", reason: "one letter missing", key: "lb.example.com/helth-check",
			want: `annotation "lb.example.com/helth-check": not declared under prefix "lb.example.com/": expected a declared annotation, such as "lb.example.com/health-check"`},
		{name: "transposed", reason: "two letters swapped count as one edit", key: "lb.example.com/algoritmh",
			want: `annotation "lb.example.com/algoritmh": not declared under prefix "lb.example.com/": expected a declared annotation, such as "lb.example.com/algorithm"`},
		{name: "wrong case", reason: "names are case-sensitive", key: "lb.example.com/Health-Check",
			want: `annotation "lb.example.com/Health-Check": not declared under prefix "lb.example.com/": expected "lb.example.com/health-check" (annotation names are case-sensitive)`},
		{name: "wrong case of a mixed-case name", reason: "the declared name as declared", key: "lb.example.com/mixed-case",
			want: `annotation "lb.example.com/mixed-case": not declared under prefix "lb.example.com/": expected "lb.example.com/Mixed-Case" (annotation names are case-sensitive)`},
		{name: "wrong case of the DNS prefix", reason: "the API server accepts it; it is under the prefix", key: "LB.Example.com/id",
			want: `annotation "LB.Example.com/id": not declared under prefix "lb.example.com/": expected "lb.example.com/id" (annotation names are case-sensitive)`},
		{name: "case and a typo", reason: "the closest name without regard to case", key: "LB.example.com/Helth-Check",
			want: `annotation "LB.example.com/Helth-Check": not declared under prefix "lb.example.com/": expected a declared annotation, such as "lb.example.com/health-check"`},
		{name: "nothing close", reason: "the first declared names under the prefix", key: "lb.example.com/timeout",
			want: `annotation "lb.example.com/timeout": not declared under prefix "lb.example.com/": expected a declared annotation, such as "lb.example.com/Mixed-Case", "lb.example.com/algorithm" or "lb.example.com/health-check"`},
		{name: "short name", reason: "within a third of its length only: ip is not id", key: "lb.example.com/ip",
			want: `annotation "lb.example.com/ip": not declared under prefix "lb.example.com/": expected a declared annotation, such as "lb.example.com/Mixed-Case", "lb.example.com/algorithm" or "lb.example.com/health-check"`},
		{name: "unclaimed prefix", reason: "other.example.com/ is not claimed", key: "other.example.com/y"},
		{name: "unclaimed, wrong case", reason: "ignored, even a declared name but for case", key: "other.example.com/X"},
		{name: "another domain", reason: "lb.example.com.evil/ is not lb.example.com/", key: "lb.example.com.evil/id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := set.Validate(map[string]string{tc.key: "v", "lb.example.com/id": "fine"})
			if diff := cmp.Diff(tc.want, errText(err)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if tc.want == "" {
				return
			}
			ae, ok := errors.AsType[*annotation.Error](err)
			if !ok || !errors.Is(err, annotation.ErrInvalid) || ae.Name != tc.key || ae.Value != "v" || ae.Prefix != "lb.example.com/" {
				t.Errorf("%s: error %#v is not an *Error naming the key, its value and the prefix", tc.reason, err)
			}
		})
	}
}

// TestValidateUndeclaredSortedAndBounded: malformed and undeclared
// annotations are reported together, sorted by name; past ten undeclared
// ones, the others are counted in one error; a huge key is cut.
func TestValidateUndeclaredSortedAndBounded(t *testing.T) {
	set := claimedSet(t)
	set.MustDeclare(annotation.Annotation{Name: "lb.example.com/port", Kind: annotation.KindInt, Doc: "d"})
	anns := map[string]string{"lb.example.com/port": "x", "lb.example.com/zz": "1", "lb.example.com/aa": "1", "unrelated.io/k": "v"}
	err := set.Validate(anns)
	var names []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		names = append(names, errorName(e))
	}
	if diff := cmp.Diff([]string{"lb.example.com/aa", "lb.example.com/port", "lb.example.com/zz"}, names); diff != "" {
		t.Errorf("errors not sorted by name (-want +got):\n%s", diff)
	}

	many := map[string]string{}
	for i := range 25 {
		many[fmt.Sprintf("lb.example.com/unknown-%02d", i)] = "v"
	}
	errs := set.Validate(many).(interface{ Unwrap() []error }).Unwrap()
	if len(errs) != 11 || errorName(errs[0]) != "lb.example.com/unknown-00" || errorName(errs[9]) != "lb.example.com/unknown-09" {
		t.Fatalf("Validate of 25 undeclared: %d errors %v; want the first 10 by name and one counting the others", len(errs), errs)
	}
	last := errs[10]
	if want := `invalid annotation: 15 more annotations under the prefixes "lb.example.com/" are not declared: expected declared annotations only`; last.Error() != want || !errors.Is(last, annotation.ErrInvalid) {
		t.Errorf("last error %q; want %q, wrapping ErrInvalid", last, want)
	}

	huge := "lb.example.com/" + strings.Repeat("x", 1<<20)
	checkBounded(t, set.Validate(map[string]string{huge: "v"}))
}

// errorName is the Name of the *annotation.Error in e's chain, or "" if
// there is none.
func errorName(e error) string {
	var ae *annotation.Error
	if !errors.As(e, &ae) {
		return ""
	}
	return ae.Name
}

// TestValidateUndeclaredManyDeclarations: with 1,000 declarations under
// the prefix, the suggestion is still the closest name (only names of
// about the key's length are compared: see the benchmark).
func TestValidateUndeclaredManyDeclarations(t *testing.T) {
	set := &annotation.Set{}
	set.MustClaimPrefix("lb.example.com/")
	for i := range 1000 {
		set.MustDeclare(annotation.Annotation{Name: fmt.Sprintf("lb.example.com/setting-%d-q%s", i, strings.Repeat("q", i%40)), Kind: annotation.KindBool, Doc: "d"})
	}
	err := set.Validate(map[string]string{"lb.example.com/settin-517-q" + strings.Repeat("q", 517%40): "true"})
	if want := `expected a declared annotation, such as "lb.example.com/setting-517-q` + strings.Repeat("q", 517%40) + `"`; !strings.HasSuffix(errText(err), want) {
		t.Errorf("error %q; want it to end %q", errText(err), want)
	}
}

// BenchmarkValidateUndeclared validates a Service of 20 annotations, 10
// of them misspelt, against 1,000 declarations under a claimed prefix.
func BenchmarkValidateUndeclared(b *testing.B) {
	set := &annotation.Set{}
	set.MustClaimPrefix("lb.example.com/")
	for i := range 1000 {
		set.MustDeclare(annotation.Annotation{Name: fmt.Sprintf("lb.example.com/setting-%03d", i), Kind: annotation.KindBool, Doc: "d"})
	}
	anns := map[string]string{}
	for i := range 10 {
		anns[fmt.Sprintf("lb.example.com/setting-%03d", i*97)] = "true"
		anns[fmt.Sprintf("lb.example.com/settnig-%03d", i*89)] = "true"
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := set.Validate(anns); err == nil {
			b.Fatal("no error")
		}
	}
}
