package admission

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/ccmkit/ccmkit/annotation"
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
	// written in its header comment; empty: that line is left out. Policy
	// ignores it.
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
// Errors start "admission.Policy: " and name the field and the value: an
// empty or invalid Name, a declared annotation whose enum value is not
// valid UTF-8 (no Kubernetes annotation can hold it).
func Policy(in PolicyInput) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	if err := in.check(); err != nil {
		return nil, nil, fmt.Errorf("admission.Policy: %w", err)
	}
	return policy(in), binding(in.Name), nil
}

// check returns the first problem of in, naming its field.
func (in PolicyInput) check() error {
	if in.Name == "" {
		return errors.New(`PolicyInput.Name is empty: expected the policy's name, a DNS subdomain such as "ccmkit-fake-service-load-balancer"`)
	}
	if errs := validation.IsDNS1123Subdomain(in.Name); len(errs) > 0 {
		return fmt.Errorf(`PolicyInput.Name %q: expected a DNS subdomain such as "ccmkit-fake-service-load-balancer": %s`, in.Name, strings.Join(errs, "; "))
	}
	for _, a := range in.Annotations.All() {
		for i, v := range a.Values {
			if !utf8.ValidString(v) {
				return fmt.Errorf("PolicyInput.Annotations: annotation %q: Values[%d] %q: expected valid UTF-8", a.Name, i, v)
			}
		}
	}
	return nil
}

// policy builds the policy of a checked in.
func policy(in PolicyInput) *admissionregistrationv1.ValidatingAdmissionPolicy {
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
	var portVars []admissionregistrationv1.Variable
	var portChecks []admissionregistrationv1.Validation
	for i, a := range declared {
		names[i] = a.Name
		if !a.PerPort {
			spec.Validations = append(spec.Validations, annotationValidation(a, i))
			continue
		}
		spec.Validations = append(spec.Validations, perPortValidation(a, i))
		portVars = append(portVars, perPortVariables(a, i)...)
		portChecks = append(portChecks, unknownPortValidation(a, i))
	}
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
	}
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
// needs. The output is deterministic. An in that Policy refuses gets
// Policy's error, starting "admission.WriteYAML: " instead, and nothing is
// written; a write error is returned unwrapped. Like Policy, it only reads
// in and is safe for concurrent use (with a writer each).
func WriteYAML(w io.Writer, in PolicyInput) error {
	if err := in.check(); err != nil {
		return fmt.Errorf("admission.WriteYAML: %w", err)
	}
	docs := make([][]byte, 0, 2)
	for _, obj := range []any{policy(in), binding(in.Name)} {
		b, err := manifest(obj)
		if err != nil {
			return fmt.Errorf("admission.WriteYAML: %w", err) // not reached: the types marshal
		}
		docs = append(docs, b)
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# Code generated by github.com/ccmkit/ccmkit/admission (WriteYAML); DO NOT EDIT.\n")
	if in.Regenerate != "" {
		fmt.Fprintf(bw, "# Regenerate with: %s\n", in.Regenerate)
	}
	bw.WriteString(header)
	for i, d := range docs {
		if i > 0 {
			bw.WriteString("---\n")
		}
		bw.Write(d)
	}
	return bw.Flush()
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
