package admission_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/ccmkit/ccmkit/admission"
	"github.com/ccmkit/ccmkit/annotation"
)

// enumSet declares len(counts) enum annotations "x.io/enum-NN", the i-th
// with counts[i] values value (a format of the value's index).
func enumSet(t testing.TB, value string, counts ...int) *annotation.Set {
	t.Helper()
	set := &annotation.Set{}
	for i, n := range counts {
		values := make([]string, n)
		for j := range values {
			values[j] = fmt.Sprintf(value, j)
		}
		set.MustDeclare(annotation.Annotation{Name: fmt.Sprintf("x.io/enum-%02d", i), Kind: annotation.KindEnum, Values: values, Doc: "d"})
	}
	return set
}

// hundredThousandValues declares 100,000 enum values of 15 bytes in 40
// annotations of different lengths: the i-th has 2305 + 10*i values, so
// each expression stays within the CEL parser's bound and the policy
// alone is too large.
func hundredThousandValues(t testing.TB) *annotation.Set {
	t.Helper()
	counts := make([]int, 40)
	for i := range counts {
		counts[i] = 2305 + 10*i
	}
	return enumSet(t, "value-%05d-enum", counts...)
}

// thousandAnnotations declares 1,000 annotations of every kind, every
// other one PerPort (but CIDR lists, which cannot be).
func thousandAnnotations(t testing.TB) *annotation.Set {
	t.Helper()
	kinds := []annotation.Kind{annotation.KindBool, annotation.KindInt, annotation.KindDuration, annotation.KindEnum, annotation.KindIP, annotation.KindCIDRList, annotation.KindString}
	set := &annotation.Set{}
	for i := range 1000 {
		a := annotation.Annotation{Name: fmt.Sprintf("lb.example.com/a%04d", i), Kind: kinds[i%len(kinds)], Doc: "d", PerPort: i%2 == 0}
		if a.Kind == annotation.KindEnum {
			a.Values = []string{"a", "b", "c"}
		}
		if a.Kind == annotation.KindCIDRList {
			a.PerPort = false
		}
		set.MustDeclare(a)
	}
	return set
}

// TestPolicyTooLarge: declarations that make a policy the apiserver
// cannot store are an error naming the annotations that weigh most, the
// largest first, with what was expected; WriteYAML writes nothing.
func TestPolicyTooLarge(t *testing.T) {
	const expected = ": expected at most 1572864 bytes (admission.MaxObjectBytes, etcd's default request limit): split the declarations or shorten enum lists"
	for _, tc := range []struct {
		name, reason string
		set          *annotation.Set
		wantStart    string
		wantLargest  []string // the names the error lists, in order; nil: not checked
	}{
		{name: "100k enum values", reason: "40 enum annotations of 2305 to 2695 values", set: hundredThousandValues(t),
			wantStart:   "admission.Policy: PolicyInput.Annotations (40 declared) make a ValidatingAdmissionPolicy of ",
			wantLargest: []string{"x.io/enum-39", "x.io/enum-38", "x.io/enum-37", "x.io/enum-36", "x.io/enum-35"}},
		{name: "1,000 annotations", reason: "every kind, half of them per port", set: thousandAnnotations(t),
			wantStart: "admission.Policy: PolicyInput.Annotations (1000 declared) make a ValidatingAdmissionPolicy of "},
		{name: "a 2 MiB enum value", reason: "one value, in the expression (the messages list the first bytes of the values)",
			set:         func() *annotation.Set { return setOf(t, strings.Repeat("v", 2<<20)) }(),
			wantStart:   "admission.Policy: PolicyInput.Annotations (1 declared) make a ValidatingAdmissionPolicy of ",
			wantLargest: []string{"x.io/e"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := admission.PolicyInput{Name: "p", Annotations: tc.set}
			p, b, err := admission.Policy(in)
			if p != nil || b != nil || err == nil {
				t.Fatalf("%s: Policy = %v, %v, %v; want an error", tc.reason, p != nil, b != nil, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tc.wantStart) || !strings.HasSuffix(msg, expected) {
				t.Fatalf("%s: error %q; want one starting %q and ending %q", tc.reason, msg, tc.wantStart, expected)
			}
			var size int
			if _, err := fmt.Sscanf(strings.TrimPrefix(msg, tc.wantStart), "%d bytes", &size); err != nil || size <= admission.MaxObjectBytes {
				t.Errorf("%s: the size in %q: %d, %v; want one over MaxObjectBytes", tc.reason, msg, size, err)
			}
			listed := regexp.MustCompile(`"([^"]+)" \(([0-9]+) bytes\)`).FindAllStringSubmatch(msg, -1)
			if len(listed) == 0 || len(listed) > 5 {
				t.Errorf("%s: the error lists %d annotations; want 1 to 5", tc.reason, len(listed))
			}
			var names []string
			prev := -1
			for _, l := range listed {
				names = append(names, l[1])
				var n int
				fmt.Sscan(l[2], &n)
				if prev >= 0 && n > prev {
					t.Errorf("%s: %q (%d bytes) listed after one of %d: want the largest first", tc.reason, l[1], n, prev)
				}
				prev = n
			}
			if tc.wantLargest != nil {
				if diff := cmp.Diff(tc.wantLargest, names); diff != "" {
					t.Errorf("%s: the annotations listed (-want +got):\n%s", tc.reason, diff)
				}
			}
			var out strings.Builder
			err = admission.WriteYAML(&out, in)
			if want := "admission.WriteYAML: " + strings.TrimPrefix(msg, "admission.Policy: "); fmt.Sprint(err) != want {
				t.Errorf("%s: WriteYAML's error %v; want %q", tc.reason, err, want)
			}
			if out.Len() > 0 {
				t.Errorf("%s: WriteYAML wrote %d bytes on error", tc.reason, out.Len())
			}
		})
	}
}

// setOf declares the enum annotation "x.io/e" with values.
func setOf(t testing.TB, values ...string) *annotation.Set {
	t.Helper()
	set := &annotation.Set{}
	set.MustDeclare(annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: values, Doc: "d"})
	return set
}

// TestPolicyAtTheLimit: a policy of MaxObjectBytes is made, one a byte
// over it is not. The test measures the JSON as Policy does (on
// purpose: the limit is on that figure), of 1,200 duration annotations
// and an enum annotation whose one value is as long as the rest allows
// (each of its bytes is a few of the policy's, measured).
func TestPolicyAtTheLimit(t *testing.T) {
	in := func(padding int) admission.PolicyInput {
		set := &annotation.Set{}
		for i := range 1200 {
			set.MustDeclare(annotation.Annotation{Name: fmt.Sprintf("lb.example.com/a%04d", i), Kind: annotation.KindDuration, Doc: "d"})
		}
		set.MustDeclare(annotation.Annotation{Name: "x.io/padding", Kind: annotation.KindEnum, Values: []string{strings.Repeat("v", padding)}, Doc: "d"})
		return admission.PolicyInput{Name: "p", Annotations: set}
	}
	size := func(padding int) (int, error) {
		p, _, err := admission.Policy(in(padding))
		if err != nil {
			return 0, err
		}
		b, err := json.Marshal(p)
		return len(b), err
	}
	// Past the first bytes (which Expected lists in the messages, up to
	// its cut), each byte of the value is rate bytes of the policy.
	const base = 2000
	small, err := size(base)
	if err != nil {
		t.Fatal(err)
	}
	more, err := size(base + 1000)
	if err != nil {
		t.Fatal(err)
	}
	rate := (more - small) / 1000
	if rate < 1 || (more-small)%1000 != 0 {
		t.Fatalf("1,000 bytes of an enum value make %d bytes of the policy: want a whole multiple", more-small)
	}
	// The largest value that fits, searched down from the estimate (JSON
	// escapes and the value count's digits make a few bytes of slack).
	padding := base + (admission.MaxObjectBytes-small)/rate + 8
	got, err := size(padding)
	for tries := 0; err != nil && tries < 64; tries++ {
		padding--
		got, err = size(padding)
	}
	if err != nil {
		t.Fatalf("no value within 64 bytes of the estimate fits: %v", err)
	}
	if got > admission.MaxObjectBytes || got <= admission.MaxObjectBytes-16 {
		t.Fatalf("the policy is %d bytes; want one within 16 bytes under %d (the test's arithmetic is off)", got, admission.MaxObjectBytes)
	}
	if _, err := size(padding + 1); err == nil || !strings.Contains(err.Error(), "make a ValidatingAdmissionPolicy of ") || !strings.Contains(err.Error(), "expected at most 1572864 bytes") {
		t.Errorf("a value one byte longer: error %v; want the size error", err)
	}
	var out strings.Builder
	if err := admission.WriteYAML(&out, in(padding)); err != nil {
		t.Errorf("WriteYAML at the limit: %v", err)
	}
}

// TestExpressionTooLong: an enum list longer than the CEL parser takes
// in one expression is an error naming the annotation, even in a policy
// within MaxObjectBytes; the limit is the apiserver's (below).
func TestExpressionTooLong(t *testing.T) {
	_, _, err := admission.Policy(admission.PolicyInput{Name: "p", Annotations: enumSet(t, "v%05d", 12000)})
	want := regexp.MustCompile(`^admission\.Policy: PolicyInput\.Annotations: annotation "x\.io/enum-00": the validation's expression is [0-9]+ code points of CEL: expected at most 100000 \(the CEL parser's limit in the apiserver\): declare fewer or shorter Values$`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Errorf("error %v; want one matching %s", err, want)
	}
	p, _, err := admission.Policy(admission.PolicyInput{Name: "p", Annotations: enumSet(t, "v%05d", 5000)})
	if err != nil {
		t.Fatalf("5000 values: %v", err)
	}
	compile(t, p, minVersion)
}

// TestTooManyAnnotations: the one variable that lists every declared
// annotation (quoted) has a CEL limit of its own, which many small
// annotations reach within MaxObjectBytes.
func TestTooManyAnnotations(t *testing.T) {
	set := &annotation.Set{}
	for i := range 1600 {
		set.MustDeclare(annotation.Annotation{Name: fmt.Sprintf("lb.example.com/a%04d", i), Kind: annotation.KindBool, Doc: "d"})
	}
	_, _, err := admission.Policy(admission.PolicyInput{Name: "p", Annotations: set})
	want := regexp.MustCompile(`^admission\.Policy: PolicyInput\.Annotations \(1600 declared\): the policy's variable "quoted" is [0-9]+ code points of CEL: expected at most 100000 \(the CEL parser's limit in the apiserver\): declare fewer annotations$`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Errorf("error %v; want one matching %s", err, want)
	}
}

// TestExpressionLimit: the apiserver's CEL environment compiles an
// expression of 100,000 code points and refuses one of 100,001.
func TestExpressionLimit(t *testing.T) {
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(minVersion))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size int
		ok   bool
	}{{size: 100_000, ok: true}, {size: 100_001, ok: false}} {
		e := "'" + strings.Repeat("é", tc.size-9) + "' == 'x'" // code points, not bytes
		r := c.CompileCELExpression(&validating.ValidationCondition{Expression: e}, plugincel.OptionalVariableDeclarations{}, environment.NewExpressions)
		if (r.Error == nil) != tc.ok {
			t.Errorf("an expression of %d code points: error %v; want compiled %v", tc.size, r.Error, tc.ok)
		}
	}
}

// BenchmarkPolicyLarge measures Policy on 100,000 enum values (which it
// refuses: too large), to show that building and measuring a policy is
// linear in the declarations.
func BenchmarkPolicyLarge(b *testing.B) {
	in := admission.PolicyInput{Name: "p", Annotations: hundredThousandValues(b)}
	for b.Loop() {
		if _, _, err := admission.Policy(in); err == nil {
			b.Fatal("no error")
		}
	}
}
