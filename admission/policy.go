package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/internal/clip"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// PolicyInput is the input of Policy and WriteYAML: what a provider
// declares, read from its loadbalancer.Reconciler (Annotations,
// Capabilities). Every field but Name is optional.
type PolicyInput struct {
	// Name is the name of the ValidatingAdmissionPolicy and of its
	// binding; required, a DNS subdomain such as
	// "ccmkit-fake-service-load-balancer".
	Name string
	// Annotations are the provider's declared annotations
	// (loadbalancer.Options.Annotations): each gets a validation. nil
	// means none.
	Annotations *annotation.Set
	// Capabilities are what the provider's load balancers support
	// (loadbalancer.Options.Capabilities): a Service asking for a feature
	// missing from them is refused. The zero value is single-stack TCP
	// only; BackendKey and SharedBackendPools are not a Service's to ask
	// for and are ignored.
	Capabilities loadbalancer.Capabilities
	// Regenerate is the command that regenerates WriteYAML's output,
	// written in its header comment; empty: that line is left out. It
	// must be one line of printable text (valid UTF-8, every rune
	// strconv.IsPrint: no control, format or line-separator character,
	// which could end the comment or show it other than it is): WriteYAML
	// refuses another. Policy ignores it.
	Regenerate string
}

// Policy returns the ValidatingAdmissionPolicy that refuses, at the
// apiserver, a LoadBalancer Service the provider's loadbalancer.Reconciler
// would refuse for a reason it can see in the Service alone (see the
// package doc for what is covered), with the Reconciler's message, and
// the binding that enforces it (validationActions Deny) in every
// namespace. Both are new objects, the caller's to change (a binding's
// matchResources, say). The output depends on in alone: validations come
// in a fixed order, the annotations' by name, then those of the PORTs of
// the PerPort ones. Policy only reads in (the
// Set included) and is safe for concurrent use.
//
// Errors start "admission.Policy: " and name the field and the value
// (cut as internal/clip cuts values): an empty or invalid Name, a
// declared annotation whose enum value is not valid UTF-8 (no Kubernetes
// annotation can hold it), and declarations that make a policy the
// apiserver refuses to store or to compile: one of more than
// MaxObjectBytes (the error lists the annotations that contribute most),
// or a CEL expression of more than 100,000 code points (the limit of the
// CEL parser, which the apiserver keeps; a long enum list makes one).
func Policy(in PolicyInput) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	p, b, err := build(in)
	if err != nil {
		return nil, nil, fmt.Errorf("admission.Policy: %w", err)
	}
	return p, b, nil
}

// build checks in and returns its policy and binding, or the first
// problem of in, naming its field; Regenerate is WriteYAML's to check.
func build(in PolicyInput) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	if err := in.check(); err != nil {
		return nil, nil, err
	}
	p, parts := policy(in)
	if err := checkSize(p, parts); err != nil {
		return nil, nil, err
	}
	return p, binding(in.Name), nil
}

// check returns the first problem of in, naming its field.
func (in PolicyInput) check() error {
	if in.Name == "" {
		return errors.New(`PolicyInput.Name is empty: expected the policy's name, a DNS subdomain such as "ccmkit-fake-service-load-balancer"`)
	}
	if errs := validation.IsDNS1123Subdomain(in.Name); len(errs) > 0 {
		return fmt.Errorf(`PolicyInput.Name %q: expected a DNS subdomain such as "ccmkit-fake-service-load-balancer": %s`, clip.Quoted(in.Name), strings.Join(errs, "; "))
	}
	for _, a := range in.Annotations.All() {
		for i, v := range a.Values {
			if !utf8.ValidString(v) {
				return fmt.Errorf("PolicyInput.Annotations: annotation %q: Values[%d] %q: expected valid UTF-8", a.Name, i, clip.Quoted(v))
			}
		}
	}
	return nil
}

// checkRegenerate returns the problem of in.Regenerate, which WriteYAML
// writes in a comment line: a line break would end the comment and make
// the rest of the command YAML (YAML 1.1 breaks lines at NEL, LS and PS
// too), and a control or format character (an escape sequence, a bidi
// override) would show it other than it is.
func (in PolicyInput) checkRegenerate() error {
	if !utf8.ValidString(in.Regenerate) || strings.ContainsFunc(in.Regenerate, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return fmt.Errorf("PolicyInput.Regenerate %q: expected one line of printable text (strconv.IsPrint), the command that regenerates the file", clip.Quoted(in.Regenerate))
	}
	return nil
}

// policy builds the policy of a checked in, and returns with it what
// each declared annotation adds to it, in the order of in.Annotations.All.
func policy(in PolicyInput) (*admissionregistrationv1.ValidatingAdmissionPolicy, []annotationPart) {
	fail := admissionregistrationv1.Fail
	spec := admissionregistrationv1.ValidatingAdmissionPolicySpec{
		FailurePolicy: &fail,
		MatchConstraints: &admissionregistrationv1.MatchResources{
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
				},
			}},
		},
		// The service controller leaves Services with a class to another
		// controller (and the Reconciler returns ImplementedElsewhere).
		MatchConditions: []admissionregistrationv1.MatchCondition{
			{Name: "type-load-balancer", Expression: "object.spec.?type.orValue('') == 'LoadBalancer'"},
			{Name: "no-load-balancer-class", Expression: "!has(object.spec.loadBalancerClass)"},
		},
		Variables: serviceVariables(),
	}
	declared := in.Annotations.All()
	before, after := fieldChecks(in.Capabilities, len(declared))
	add := func(cs []fieldCheck) {
		for _, c := range cs {
			spec.Variables = append(spec.Variables, c.variables...)
			c.validation.Reason = reasonInvalid()
			spec.Validations = append(spec.Validations, c.validation)
		}
	}
	add(before)
	names := make([]string, len(declared))
	parts := make([]annotationPart, len(declared))
	var portVars []admissionregistrationv1.Variable
	var portChecks []admissionregistrationv1.Validation
	for i, a := range declared {
		names[i] = a.Name
		parts[i] = annotationParts(a, i)
		spec.Validations = append(spec.Validations, parts[i].validations[0])
		portChecks = append(portChecks, parts[i].validations[1:]...)
		portVars = append(portVars, parts[i].variables...)
	}
	// Set.Validate reports the undeclared keys with the malformed values.
	spec.Validations = append(spec.Validations, claimedValidations(in.Annotations)...)
	// The Service's ports are checked once every annotation parses, as
	// Desired checks them with each one's parsed value.
	spec.Validations = append(spec.Validations, portChecks...)
	add(after)
	spec.Variables = append(spec.Variables, escapesVariable(), quotedVariable(names))
	if len(portVars) > 0 {
		spec.Variables = append(append(spec.Variables, portVariables()...), portVars...)
	}
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: in.Name},
		Spec:       spec,
	}, parts
}

// annotationPart is what the declared annotation name adds to the
// policy: its validation, then (a PerPort one) the check of its PORTs,
// and its variables.
type annotationPart struct {
	name        string
	validations []admissionregistrationv1.Validation
	variables   []admissionregistrationv1.Variable
}

// annotationParts returns the part of a, the i-th declared annotation.
func annotationParts(a *annotation.Annotation, i int) annotationPart {
	if !a.PerPort {
		return annotationPart{name: a.Name, validations: []admissionregistrationv1.Validation{annotationValidation(a, i)}}
	}
	return annotationPart{name: a.Name,
		validations: []admissionregistrationv1.Validation{perPortValidation(a, i), unknownPortValidation(a, i)},
		variables:   perPortVariables(a, i)}
}

// binding binds the policy name everywhere, denying what it refuses.
func binding(name string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}

// WriteYAML writes the policy and binding of Policy(in) to w as one YAML
// stream of two documents, after a header comment saying that it is
// generated, by what, how to regenerate it (in.Regenerate) and what it
// needs. The objects are marshalled from their Go values (no value of in
// is written but as a YAML string of theirs), and the comment holds
// in.Regenerate only when it is one line of printable text: the stream
// decodes, strictly, to the two objects Policy returns, whatever in
// holds. The output is deterministic. An in that Policy refuses gets
// Policy's error, starting "admission.WriteYAML: " instead, as does a
// Regenerate of another text, and nothing is written; a write error is
// returned unwrapped. Like Policy, it only reads in and is safe for
// concurrent use (with a writer each).
func WriteYAML(w io.Writer, in PolicyInput) error {
	b, err := stream(in)
	if err != nil {
		return fmt.Errorf("admission.WriteYAML: %w", err)
	}
	_, err = w.Write(b)
	return err
}

// stream returns the YAML stream WriteYAML writes, or the first problem
// of in.
func stream(in PolicyInput) ([]byte, error) {
	if err := in.checkRegenerate(); err != nil {
		return nil, err
	}
	p, b, err := build(in)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteString("# Code generated by github.com/ccmkit/ccmkit/admission (WriteYAML); DO NOT EDIT.\n")
	if in.Regenerate != "" {
		out.WriteString("# Regenerate with: " + in.Regenerate + "\n") // one printable line: checkRegenerate
	}
	out.WriteString(header)
	for i, obj := range []any{p, b} {
		d, err := manifest(obj)
		if err != nil {
			return nil, err // not reached: the types marshal
		}
		if i > 0 {
			out.WriteString("---\n") // d ends with a line break: yaml.Marshal
		}
		out.Write(d)
	}
	return out.Bytes(), nil
}

// manifest returns obj in YAML without its status, which is the
// apiserver's to write.
func manifest(obj any) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	return yaml.Marshal(m)
}

// header says what the manifest does and needs.
const header = `#
# A ValidatingAdmissionPolicy and its binding: the apiserver refuses a
# Service of type LoadBalancer (without spec.loadBalancerClass) that the
# provider's load-balancer Reconciler would refuse for a reason it can see in
# the Service alone, with the Reconciler's message: a malformed declared
# annotation, a feature the provider does not support. On UPDATE only what
# changed is checked. Needs Kubernetes 1.30 or newer.
`
