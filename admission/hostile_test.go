package admission_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	yamlv3 "go.yaml.in/yaml/v3"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/ccmkit/ccmkit/admission"
	"github.com/ccmkit/ccmkit/annotation"
)

// hostileText are strings that break YAML or CEL text they are spliced
// into: line breaks (YAML 1.1's NEL, LS, PS too), document markers, keys,
// quotes of every kind, comment and flow characters, controls, bidi
// overrides, a byte-order mark.
var hostileText = []string{
	"a\nkind: Secret", "a\n---\nkind: Secret", "---", "...", "a\r\nb", "a\rb", "a\u0085b", "a\u2028b", "a\u2029b",
	"a\x00b", "\x1b[31mred\x1b[0m", "a\tb", "\x7f", "\ufeffa", "a\u202eb\u202c", "a\u2066b\u2069", "\u200b",
	`"`, `'`, "`", `\`, `\"`, `\'`, `a" + "b`, `a' + 'b`, `" || true || "`, `\u0041`, `\x41`, `${x}`, "%q",
	"#", "a #b", "a: b", ": ", "- a", "? a", "[a]", "{a: b}", "&a", "*a", "!!str", "|", ">", "@a", "%YAML 1.2",
	"é", "𝄞", "\u00a0a",
}

// hostileSet declares an enum annotation (and a per-port one, without
// the values holding a comma) whose Values are the hostileText that
// annotation.Set.Declare takes, with a hostile Doc; skipped are the
// values Declare refuses (surrounding space; control characters, when
// package annotation refuses them), which no policy can hold.
func hostileSet(t *testing.T) (*annotation.Set, []string) {
	t.Helper()
	var values []string
	for _, v := range hostileText {
		probe := &annotation.Set{}
		if _, err := probe.Declare(annotation.Annotation{Name: "x.io/probe", Kind: annotation.KindEnum, Values: []string{v}, Doc: "d"}); err != nil {
			t.Logf("not declarable, left out: %q: %v", v, err)
			continue
		}
		values = append(values, v)
	}
	var perPort []string
	for _, v := range values {
		if !strings.Contains(v, ",") {
			perPort = append(perPort, v)
		}
	}
	set := &annotation.Set{}
	doc := "Doc\nkind: Secret\n---\n# a: b\n%YAML 1.2" // Declare refuses other control characters in a Doc
	set.MustDeclare(annotation.Annotation{Name: "x.io/hostile", Kind: annotation.KindEnum, Values: values, Doc: doc})
	set.MustDeclare(annotation.Annotation{Name: "x.io/hostile-ports", Kind: annotation.KindEnum, Values: perPort, PerPort: true, Doc: doc})
	set.MustDeclare(annotation.Annotation{Name: "x.io/flag", Kind: annotation.KindBool, Doc: doc})
	return set, values
}

// decodeStrict splits the YAML stream b into documents as kubectl does
// (utilyaml.YAMLReader), checks that yaml.v3 sees the same number of
// documents, and decodes the two it must hold strictly.
func decodeStrict(t *testing.T, b []byte) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("splitting the YAML: %v", err)
		}
		docs = append(docs, d)
	}
	v3 := 0
	for dec := yamlv3.NewDecoder(bytes.NewReader(b)); ; v3++ {
		var n yamlv3.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("yaml.v3, document %d: %v", v3, err)
		}
	}
	if len(docs) != 2 || v3 != 2 {
		t.Fatalf("%d YAML documents as kubectl splits them, %d as yaml.v3 reads them; want 2", len(docs), v3)
	}
	var p admissionregistrationv1.ValidatingAdmissionPolicy
	var pb admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict(docs[0], &p); err != nil {
		t.Fatalf("the policy document: %v", err)
	}
	if err := yaml.UnmarshalStrict(docs[1], &pb); err != nil {
		t.Fatalf("the binding document: %v", err)
	}
	return &p, &pb
}

// TestWriteYAMLHostile: hostile declarations and a hostile Regenerate
// either make a stream of exactly the two objects Policy returns, decoded
// strictly, or an error naming the field, with nothing written.
func TestWriteYAMLHostile(t *testing.T) {
	set, _ := hostileSet(t)
	huge := strings.Repeat("x", 1<<20)
	type row struct {
		name, reason string
		in           admission.PolicyInput
		wantErr      string // the start of the error after "admission.WriteYAML: "; "" for none
	}
	rows := []row{
		{name: "hostile values", reason: "every value and the docs are YAML strings, whatever they hold",
			in: admission.PolicyInput{Name: "p", Annotations: set, Regenerate: "go run ./cmd/gen --out 'a b.yaml' # \"x\": 'y' --- é"}},
		{name: "huge command", reason: "one line, however long, stays a comment", in: admission.PolicyInput{Name: "p", Regenerate: huge}},
		{name: "huge command with a newline", reason: "the value is cut in the error",
			in:      admission.PolicyInput{Name: "p", Regenerate: huge + "\nkind: Secret"},
			wantErr: `PolicyInput.Regenerate "` + strings.Repeat("x", 256) + `… (1048589 bytes)": expected one line of printable text`},
		{name: "huge name", reason: "cut in the error", in: admission.PolicyInput{Name: huge},
			wantErr: `PolicyInput.Name "` + strings.Repeat("x", 256) + `… (1048576 bytes)": expected a DNS subdomain`},
		{name: "name with a quote and a colon", reason: "not an object name (in a command, printable: see hostile values)",
			in: admission.PolicyInput{Name: `p": x`}, wantErr: `PolicyInput.Name "p\": x": expected a DNS subdomain`},
	}
	// Short refused values, quoted whole in the error (Go's %q).
	for _, bad := range []struct{ name, reason, value string }{
		{name: "a newline", reason: "a comment line cannot hold one: the next line would be YAML", value: "go run .\nkind: Secret"},
		{name: "a document marker", reason: "a newline and ---", value: "x\n---\nkind: Secret\nmetadata: {name: s}"},
		{name: "CR", reason: "a YAML line break", value: "x\rkind: Secret"},
		{name: "LS", reason: "a line break in YAML 1.1", value: "x\u2028kind: Secret"},
		{name: "NEL", reason: "a line break in YAML 1.1", value: "x\u0085kind: Secret"},
		{name: "NUL", reason: "a control character", value: "x\x00"},
		{name: "ESC", reason: "a terminal escape", value: "x\x1b[2J"},
		{name: "a bidi override", reason: "it would show the text other than it is", value: "go run . \u202e"},
		{name: "not UTF-8", reason: "no YAML can hold it", value: "go \xff"},
	} {
		rows = append(rows,
			row{name: "command with " + bad.name, reason: bad.reason, in: admission.PolicyInput{Name: "p", Regenerate: bad.value},
				wantErr: fmt.Sprintf("PolicyInput.Regenerate %q: expected one line of printable text", bad.value)},
			row{name: "name with " + bad.name, reason: "not an object name: " + bad.reason, in: admission.PolicyInput{Name: bad.value},
				wantErr: fmt.Sprintf("PolicyInput.Name %q: expected a DNS subdomain", bad.value)})
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := admission.WriteYAML(&out, tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), "admission.WriteYAML: "+tc.wantErr) {
					t.Fatalf("%s: error %v; want one starting %q", tc.reason, err, "admission.WriteYAML: "+tc.wantErr)
				}
				if out.Len() > 0 {
					t.Errorf("%s: %d bytes written on error", tc.reason, out.Len())
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			gotPolicy, gotBinding := decodeStrict(t, out.Bytes())
			wantPolicy, wantBinding, err := admission.Policy(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantPolicy, gotPolicy); diff != "" {
				t.Errorf("%s: the policy (-Policy +YAML):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(wantBinding, gotBinding); diff != "" {
				t.Errorf("%s: the binding (-Policy +YAML):\n%s", tc.reason, diff)
			}
			if tc.in.Regenerate != "" && !strings.Contains(out.String(), "\n# Regenerate with: "+tc.in.Regenerate+"\n") {
				t.Errorf("%s: the header does not give the command", tc.reason)
			}
		})
	}
}

// TestHostileCEL: enum values that would break a CEL string they were
// spliced into compile as literals in the apiserver's CEL environment,
// and the policy takes each value exactly, as the Reconciler does, and
// refuses another with the Reconciler's message.
func TestHostileCEL(t *testing.T) {
	set, values := hostileSet(t)
	p, _, err := admission.Policy(admission.PolicyInput{Name: "p", Annotations: set, Capabilities: allCaps})
	if err != nil {
		t.Fatal(err)
	}
	c := compile(t, p, minVersion)
	check := func(name, value string) {
		t.Helper()
		svc := lbService(annotated(name, value))
		want := verdict{Denied: reconciler(svc, set, allCaps)}
		if diff := cmp.Diff(want, evaluate(t, c, svc, nil)); diff != "" {
			t.Errorf("%s %q: the policy and the Reconciler disagree (-Reconciler +policy):\n%s", name, value, diff)
		}
	}
	for _, v := range values {
		check("x.io/hostile", v)
		check("x.io/hostile", v+"x")
		check("x.io/hostile", "x"+v)
		if !strings.Contains(v, ",") {
			check("x.io/hostile-ports", "80="+v)
			check("x.io/hostile-ports", "80="+v+"x")
		}
	}
	for _, v := range p.Spec.Validations {
		if strings.Contains(v.Message, "\n") || strings.Contains(v.Message, "\r") {
			t.Errorf("a static message has a line break, which the apiserver refuses: %q", v.Message)
		}
	}
}
