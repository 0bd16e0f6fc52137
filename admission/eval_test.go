package admission_test

import (
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	apiadmission "k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/ccmkit/ccmkit/admission"
	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// The policy is evaluated here as the apiserver evaluates it: the
// expressions compiled by the ValidatingAdmissionPolicy plugin's compiler
// (k8s.io/apiserver admission/plugin/policy/validating, plugin.go
// compilePolicy, repeated below because it is not exported), in the CEL
// environment of the oldest Kubernetes the policy is for, run by its
// Validator with the apiserver's cost budget.

// minVersion is the oldest Kubernetes whose CEL the policy may use: 1.30,
// where ValidatingAdmissionPolicy is GA and the ip and cidr libraries came.
var minVersion = version.MajorMinor(1, 30)

var servicesGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}
var serviceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Service"}

// compile compiles p as compilePolicy does, with the base environment of
// ver for new expressions (what the apiserver of that version accepts in
// a new policy), and fails t on any compilation error.
func compile(t testing.TB, p *admissionregistrationv1.ValidatingAdmissionPolicy, ver *version.Version) validating.Validator {
	t.Helper()
	env := environment.MustBaseEnvSet(ver)
	c, err := plugincel.NewCompositedCompiler(env)
	if err != nil {
		t.Fatal(err)
	}
	const mode = environment.NewExpressions
	withAuthz := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	withoutAuthz := plugincel.OptionalVariableDeclarations{}
	for _, v := range p.Spec.Variables {
		if r := c.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, withAuthz, mode); r.Error != nil {
			t.Fatalf("variable %s does not compile for Kubernetes %s: %v", v.Name, ver, r.Error)
		}
	}
	var conds, messages []plugincel.ExpressionAccessor
	for _, v := range p.Spec.Validations {
		conds = append(conds, &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason})
		messages = append(messages, &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression})
		check := func(what string, a plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations) {
			if r := c.CompileCELExpression(a, opts, mode); r.Error != nil {
				t.Fatalf("%s does not compile for Kubernetes %s: %v\n%s", what, ver, r.Error, a.GetExpression())
			}
		}
		check("a validation's expression", conds[len(conds)-1], withAuthz)
		check("a validation's messageExpression", messages[len(messages)-1], withoutAuthz)
	}
	var matches []plugincel.ExpressionAccessor
	for i := range p.Spec.MatchConditions {
		m := (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		if r := c.CompileCELExpression(m, withAuthz, mode); r.Error != nil {
			t.Fatalf("matchCondition %s does not compile: %v", m.Name, r.Error)
		}
		matches = append(matches, m)
	}
	matcher := matchconditions.NewMatcher(c.CompileCondition(matches, withAuthz, mode), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	return validating.NewValidator(c.CompileCondition(conds, withAuthz, mode), matcher, c.CompileCondition(nil, withAuthz, mode),
		c.CompileCondition(messages, withoutAuthz, mode), p.Spec.FailurePolicy, nil)
}

// compiled is a policy compiled by compile.
type compiled struct{ v validating.Validator }

// evaluate is evaluate with c's Validator.
func (c *compiled) evaluate(t testing.TB, svc, old *v1.Service) verdict {
	t.Helper()
	return evaluate(t, c.v, svc, old)
}

// policies compiles the policy of set once per Capabilities: compiling
// is the slow part of these tests.
type policies struct {
	set      *annotation.Set
	compiled map[string]*compiled // by fmt.Sprintf("%#v") of the Capabilities, which are not comparable
}

func newPolicies(set *annotation.Set) *policies {
	return &policies{set: set, compiled: map[string]*compiled{}}
}

// of returns the compiled policy for caps.
func (ps *policies) of(t testing.TB, caps loadbalancer.Capabilities) *compiled {
	t.Helper()
	key := fmt.Sprintf("%#v", caps)
	if c, ok := ps.compiled[key]; ok {
		return c
	}
	p, _, err := admission.Policy(admission.PolicyInput{Name: "p", Annotations: ps.set, Capabilities: caps})
	if err != nil {
		t.Fatalf("Policy: %v", err)
	}
	c := &compiled{v: compile(t, p, minVersion)}
	ps.compiled[key] = c
	return c
}

// verdict is what the apiserver makes of a request: the messages of the
// denying validations, in order (the apiserver shows the first), and
// those of validations that failed to evaluate (never the user's message:
// each is a bug of the policy).
type verdict struct {
	Denied []string
	Errors []string
}

// evaluate runs v on a request to create svc (old nil) or to update old
// to svc, with the apiserver's per-binding cost budget.
func evaluate(t testing.TB, v validating.Validator, svc, old *v1.Service) verdict {
	t.Helper()
	op, opts := apiadmission.Create, runtime.Object(&metav1.CreateOptions{})
	va := &apiadmission.VersionedAttributes{VersionedKind: serviceGVK, VersionedObject: apiadmission.NewLazyObject(svc)}
	var oldObj runtime.Object // nil, not a nil *v1.Service, on CREATE
	if old != nil {
		op, opts, oldObj = apiadmission.Update, &metav1.UpdateOptions{}, old
		va.VersionedOldObject = apiadmission.NewLazyObject(old)
	}
	va.Attributes = apiadmission.NewAttributesRecord(svc, oldObj, serviceGVK, svc.Namespace, svc.Name, servicesGVR, "", op, opts, false, &user.DefaultInfo{Name: "test"})
	res := v.Validate(t.Context(), servicesGVR, va, nil, nil, celconfig.RuntimeCELCostBudget, nil)
	var out verdict
	for _, d := range res.Decisions {
		switch {
		case d.Evaluation == validating.EvalError:
			out.Errors = append(out.Errors, d.Message)
		case d.Action == validating.ActionDeny:
			out.Denied = append(out.Denied, d.Message)
		}
	}
	return out
}

// lines splits an error of the Reconciler (errors.Join) into its
// messages; none for nil.
func lines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}
