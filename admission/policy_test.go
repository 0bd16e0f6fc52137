package admission_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/ccmkit/ccmkit/admission"
	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/internal/annotationtest"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// allCaps is every feature a Service can ask for.
var allCaps = loadbalancer.Capabilities{UDP: true, SCTP: true, MixedProtocols: true, DualStack: true,
	NodePortless: true, SourceRanges: true, ClientIPAffinity: true, RequestedIP: true}

// lbService returns a LoadBalancer Service as the apiserver hands it to
// admission, defaulted: shop/web, TCP 80 → node port 30080, IPv4 only,
// modified by mods.
func lbService(mods ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web"},
		Spec: v1.ServiceSpec{
			Type:                          v1.ServiceTypeLoadBalancer,
			Ports:                         []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
			ClusterIP:                     "10.96.0.10",
			ClusterIPs:                    []string{"10.96.0.10"},
			IPFamilies:                    []v1.IPFamily{v1.IPv4Protocol},
			IPFamilyPolicy:                ptr.To(v1.IPFamilyPolicySingleStack),
			ExternalTrafficPolicy:         v1.ServiceExternalTrafficPolicyCluster,
			SessionAffinity:               v1.ServiceAffinityNone,
			AllocateLoadBalancerNodePorts: ptr.To(true),
		},
	}
	for _, m := range mods {
		m(svc)
	}
	return svc
}

// annotated returns a modifier setting annotations (name, value pairs).
func annotated(kv ...string) func(*v1.Service) {
	return func(s *v1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			s.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// declarations returns the annotations of every kind of the shared
// fixture (annotationtest.EveryKind), with three more int annotations: an
// unbounded one, one bounded below zero and one bounded by int64's limits.
func declarations(t testing.TB) (*annotation.Set, map[string]*annotation.Annotation) {
	t.Helper()
	set, byKind := annotationtest.EveryKind(t)
	byName := map[string]*annotation.Annotation{}
	for _, a := range byKind {
		byName[string(a.Kind)] = a
	}
	for key, a := range map[string]annotation.Annotation{
		"int unbounded": {Name: "lb.example.com/weight", Kind: annotation.KindInt, Doc: "Any integer."},
		"int negative":  {Name: "lb.example.com/offset", Kind: annotation.KindInt, Min: -10, Max: -1, Doc: "Below zero."},
		"int extreme":   {Name: "lb.example.com/extreme", Kind: annotation.KindInt, Min: math.MinInt64, Max: math.MaxInt64, Doc: "Bounded by int64."},
	} {
		byName[key] = set.MustDeclare(a)
	}
	return set, byName
}

// perPortDeclarations returns declarations with a PerPort copy of each
// annotation of EveryKind but the CIDR list ("bool per port", named after
// it with "-ports"). The tests that need no PerPort one use declarations:
// a policy of more validations is slower to compile.
func perPortDeclarations(t testing.TB) (*annotation.Set, map[string]*annotation.Annotation) {
	t.Helper()
	set, byName := declarations(t)
	for _, kind := range []annotation.Kind{annotation.KindBool, annotation.KindInt, annotation.KindDuration, annotation.KindEnum, annotation.KindIP, annotation.KindString} {
		perPort := *byName[string(kind)]
		perPort.Name += "-ports"
		perPort.PerPort = true
		byName[string(kind)+" per port"] = set.MustDeclare(perPort)
	}
	return set, byName
}

// reconciler returns what the Reconciler says of svc: the messages of
// loadbalancer.Desired's error (the text of its Warning event), one a
// problem.
func reconciler(svc *v1.Service, set *annotation.Set, caps loadbalancer.Capabilities) []string {
	_, err := loadbalancer.Desired(svc, nil, loadbalancer.DesiredInput{Cluster: "c1", Capabilities: caps, Annotations: set})
	return lines(err)
}

// valueCorpus are values of each kind, to be read as the Reconciler reads
// them: valid, malformed, and the edges of each parser.
var valueCorpus = map[string][]string{
	"bool": {"true", "false", " true ", "\ttrue\n", "True", "TRUE", "yes", "1", "", " ", "truee", "true false"},
	"int": {"1", "100000", "0", "100001", "+5", "-5", "-0", "0005", "  42  ", "4 2", "1e3", "0x10", "1_000", "+", "-", "", "٣",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "99999999999999999999",
		"000000000000000000000000000000042", "+0000000000000000009223372036854775807"},
	"int unbounded": {"0", "-42", "+42", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"18446744073709551616", "1.0", "00000000000000000000000000000000000000000001"},
	"int negative": {"-1", "-10", "-11", "0", "1", "-05"},
	"int extreme":  {"-9223372036854775808", "9223372036854775807", "9223372036854775808", "0"},
	"duration": {"30s", "1m30s", " 1h ", "0", "-0", "+0", "00", "0s", "-0s", "-1s", "-0.1ns", "1.5h", ".5s", "5.s", ".s", "1", "1x", "s",
		"1µs", "1μs", "1us", "1ns1ns", "1h1h1h", "1m.5s", "1H", "1 s", "1h 1m", "+1s", "1.5e3s", "", " ", "-",
		"2562047h", "2562048h", "2562047h47m16.85s", "2562047h47m16.854775808s",
		"9223372036850000000ns", "9223372036854775808ns", "-9223372036854775808ns", "99999999999999999999ns",
		"0000000000000000000000001s", "1.0000000000000000000000001s", "0.000000000000000000000000000001h", "1e3"},
	"enum": {"round-robin", " least-connections ", "Round-Robin", "", "round-robin,least-connections", "least", "round-robin "},
	"IP": {"10.0.0.1", " 10.0.0.1 ", "2001:db8::1", "2001:DB8::1", "::", "0.0.0.0", "::ffff:1.2.3.4", "::FFFF:1.2.3.4",
		"0:0:0:0:0:ffff:102:304", "::ffff:ffff:ffff", "0::ffff:1.2.3.4", "::ffff:0:0", "0000:0000:0000:0000:0000:ffff:255.255.255.255",
		"::1.2.3.4", "fe80::1%eth0", "010.0.0.1", "1.2.3", "1.2.3.256", "", "1.2.3.4/32", "::ffff:01.2.3.4", "1:2:3:4:5:6:7:8:9",
		"1:2:3:4:5:6:7::8", "00000::1", "1::2::3", "::ffff:1.2.3.4.5", "0000:0000:0000:0000:0000:ffff:255.255.255.255 "},
	"CIDR list": {"10.0.0.0/8", "10.0.0.1/8", " 10.0.0.0/8 , 2001:db8::/32 ", "10.0.0.0/8,", ",", "", " ", "10.0.0.0/33", "10.0.0.0/08",
		"10.0.0.0/-1", "10.0.0.0/+8", "::ffff:1.2.3.4/96", "::ffff:1.2.3.4/129", "fe80::1%eth0/64", "10.0.0.0", "10.0.0.0/8,10.0.0.0/8",
		"1.2.3.4/0", "::/0", "010.0.0.0/8", "10.0.0.0/8;192.168.0.0/16", "10.0.0.0/8,,192.168.0.0/16"},
	"string": {"x", " x ", "", " ", "\t\n", "\u00a0", "\u200b", "lb-123"},
}

// quotedCorpus are malformed values whose quoting the messages must get
// right: escapes, multi-byte runes and the cut at 256 bytes.
var quotedCorpus = []string{
	"a\"b\\c", "tab\there", "nl\nx", "\x01\x02\x1b\x7f", "\a\b\f\r\v", "é-ü-€-𝄞", "'single'",
	strings.Repeat("x", 256), strings.Repeat("x", 257), strings.Repeat("é", 128) + "x", strings.Repeat("é", 129),
	"x" + strings.Repeat("é", 130), "xx" + strings.Repeat("€", 100), strings.Repeat("𝄞", 70), strings.Repeat("\x01", 300),
}

// TestAnnotationsAgree: for every kind and every value of the corpus, the
// policy refuses the Service exactly when the Reconciler does, with its
// message, and never fails to evaluate.
func TestAnnotationsAgree(t *testing.T) {
	set, byName := declarations(t)
	ps := newPolicies(set)
	p := ps.of(t, allCaps)
	check := func(t *testing.T, a *annotation.Annotation, value string) {
		svc := lbService(annotated(a.Name, value))
		want := reconciler(svc, set, allCaps)
		got := p.evaluate(t, svc, nil)
		if diff := cmp.Diff(verdict{Denied: want}, got); diff != "" {
			t.Errorf("%s %q: the policy and the Reconciler disagree (-Reconciler +policy):\n%s", a.Name, value, diff)
		}
	}
	for key, values := range valueCorpus {
		t.Run(key, func(t *testing.T) {
			for _, v := range values {
				check(t, byName[key], v)
			}
		})
	}
	t.Run("quoting", func(t *testing.T) {
		for _, key := range []string{"bool", "int", "duration", "enum", "IP", "CIDR list"} {
			for _, v := range quotedCorpus {
				check(t, byName[key], v)
			}
		}
	})
}

// TestAnnotationMessages pins the message of one malformed value of each
// kind, word for word (the property test above compares with the
// Reconciler, whose words these are).
func TestAnnotationMessages(t *testing.T) {
	set, _ := declarations(t)
	ps := newPolicies(set)
	p := ps.of(t, loadbalancer.Capabilities{})
	for _, tc := range []struct {
		name, reason string
		key, value   string
		want         string
	}{
		{name: "bool", reason: "exactly true or false", key: "lb.example.com/proxy-protocol", value: "yes",
			want: `annotation "lb.example.com/proxy-protocol": invalid value "yes": expected "true" or "false"`},
		{name: "int", reason: "the bounds", key: "lb.example.com/max-connections", value: "0",
			want: `annotation "lb.example.com/max-connections": invalid value "0": expected an integer from 1 to 100000`},
		{name: "duration", reason: "negative", key: "lb.example.com/idle-timeout", value: "-5s",
			want: `annotation "lb.example.com/idle-timeout": invalid value "-5s": expected a non-negative duration such as "30s" or "1m30s"`},
		{name: "enum", reason: "the values", key: "lb.example.com/algorithm", value: "random",
			want: `annotation "lb.example.com/algorithm": invalid value "random": expected one of "round-robin", "least-connections"`},
		{name: "IP", reason: "a zone", key: "lb.example.com/ip", value: "fe80::1%eth0",
			want: `annotation "lb.example.com/ip": invalid value "fe80::1%eth0": expected an IPv4 or IPv6 address`},
		{name: "CIDR list", reason: "an empty entry", key: "lb.example.com/internal-ranges", value: "10.0.0.0/8,",
			want: `annotation "lb.example.com/internal-ranges": invalid value "10.0.0.0/8,": expected a comma-separated list of CIDRs such as "10.0.0.0/8,2001:db8::/32"`},
		{name: "string", reason: "blank", key: "lb.example.com/id", value: " \t",
			want: `annotation "lb.example.com/id": invalid value " \t": expected a non-empty string`},
		{name: "cut", reason: "a long value is cut at 256 bytes with its length", key: "lb.example.com/proxy-protocol", value: strings.Repeat("y", 300),
			want: `annotation "lb.example.com/proxy-protocol": invalid value "` + strings.Repeat("y", 256) + `… (300 bytes)": expected "true" or "false"`},
		{name: "escapes", reason: "Go's %q of control characters", key: "lb.example.com/proxy-protocol", value: "\x00\n\"",
			want: `annotation "lb.example.com/proxy-protocol": invalid value "\x00\n\"": expected "true" or "false"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := p.evaluate(t, lbService(annotated(tc.key, tc.value)), nil)
			if diff := cmp.Diff(verdict{Denied: []string{tc.want}}, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestPolicyShape: the policy matches creates and updates of Services
// (not their status), fails closed, and its binding denies; a nil Set
// means no annotation validation.
func TestPolicyShape(t *testing.T) {
	p, b, err := admission.Policy(admission.PolicyInput{Name: "ccmkit-x-service-load-balancer", Capabilities: allCaps})
	if err != nil {
		t.Fatal(err)
	}
	type shape struct {
		Name, BindingName, PolicyName string
		FailurePolicy                 admissionregistrationv1.FailurePolicyType
		Rules                         []admissionregistrationv1.NamedRuleWithOperations
		Actions                       []admissionregistrationv1.ValidationAction
		Validations                   int
		BindingMatch                  *admissionregistrationv1.MatchResources
	}
	got := shape{Name: p.Name, BindingName: b.Name, PolicyName: b.Spec.PolicyName, FailurePolicy: *p.Spec.FailurePolicy,
		Rules: p.Spec.MatchConstraints.ResourceRules, Actions: b.Spec.ValidationActions, Validations: len(p.Spec.Validations), BindingMatch: b.Spec.MatchResources}
	want := shape{Name: "ccmkit-x-service-load-balancer", BindingName: "ccmkit-x-service-load-balancer", PolicyName: "ccmkit-x-service-load-balancer",
		FailurePolicy: admissionregistrationv1.Fail,
		Rules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
		}}},
		Actions:     []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		Validations: 1, // spec.loadBalancerIP, whatever the capabilities
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, v := range p.Spec.Validations {
		if v.Reason == nil || *v.Reason != metav1.StatusReasonInvalid || v.Message == "" || v.MessageExpression == "" {
			t.Errorf("validation %q: reason %v, message %q, messageExpression %q; want reason Invalid and both messages", v.Expression, v.Reason, v.Message, v.MessageExpression)
		}
	}
}

// TestPolicyInputErrors: input Policy cannot use is an error naming the
// field and the value; WriteYAML says the same and writes nothing.
func TestPolicyInputErrors(t *testing.T) {
	bad := &annotation.Set{}
	bad.MustDeclare(annotation.Annotation{Name: "x.io/e", Kind: annotation.KindEnum, Values: []string{"ok", "\xff"}, Doc: "d"})
	for _, tc := range []struct {
		name, reason string
		in           admission.PolicyInput
		want         string
	}{
		{name: "no name", reason: "Name is required", in: admission.PolicyInput{},
			want: `PolicyInput.Name is empty: expected the policy's name, a DNS subdomain such as "ccmkit-fake-service-load-balancer"`},
		{name: "bad name", reason: "a DNS subdomain", in: admission.PolicyInput{Name: "Load_Balancers"},
			want: `PolicyInput.Name "Load_Balancers": expected a DNS subdomain such as "ccmkit-fake-service-load-balancer": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{name: "enum not UTF-8", reason: "no annotation can hold it, CEL cannot write it", in: admission.PolicyInput{Name: "p", Annotations: bad},
			want: `PolicyInput.Annotations: annotation "x.io/e": Values[1] "\xff": expected valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, b, err := admission.Policy(tc.in)
			if p != nil || b != nil || err == nil {
				t.Fatalf("%s: Policy = %v, %v, %v; want an error", tc.reason, p, b, err)
			}
			if diff := cmp.Diff("admission.Policy: "+tc.want, err.Error()); diff != "" {
				t.Errorf("%s: Policy's error (-want +got):\n%s", tc.reason, diff)
			}
			var out strings.Builder
			err = admission.WriteYAML(&out, tc.in)
			if diff := cmp.Diff("admission.WriteYAML: "+tc.want, fmt.Sprint(err)); diff != "" {
				t.Errorf("%s: WriteYAML's error (-want +got):\n%s", tc.reason, diff)
			}
			if out.Len() > 0 {
				t.Errorf("%s: WriteYAML wrote %d bytes on error", tc.reason, out.Len())
			}
		})
	}
}

// TestWriteYAML: the YAML is the header, then the policy and the binding
// Policy returns (without status), the same bytes every time; a write
// error is returned as it is.
func TestWriteYAML(t *testing.T) {
	set, _ := declarations(t)
	in := admission.PolicyInput{Name: "p", Annotations: set, Regenerate: "go run ./cmd/gen"}
	var a, b bytes.Buffer
	if err := admission.WriteYAML(&a, in); err != nil {
		t.Fatal(err)
	}
	if err := admission.WriteYAML(&b, in); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two WriteYAML of one input differ")
	}
	header, _, _ := strings.Cut(a.String(), "\napiVersion:")
	for _, s := range []string{"# Code generated by github.com/ccmkit/ccmkit/admission (WriteYAML); DO NOT EDIT.\n", "\n# Regenerate with: go run ./cmd/gen\n", "Kubernetes 1.30"} {
		if !strings.Contains(header+"\n", s) {
			t.Errorf("the header does not say %q:\n%s", s, header)
		}
	}
	docs := strings.Split(a.String(), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%d YAML documents, want 2", len(docs))
	}
	wantPolicy, wantBinding, err := admission.Policy(in)
	if err != nil {
		t.Fatal(err)
	}
	var gotPolicy admissionregistrationv1.ValidatingAdmissionPolicy
	var gotBinding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &gotPolicy); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &gotBinding); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantPolicy, &gotPolicy); diff != "" {
		t.Errorf("the policy (-Policy +YAML):\n%s", diff)
	}
	if diff := cmp.Diff(wantBinding, &gotBinding); diff != "" {
		t.Errorf("the binding (-Policy +YAML):\n%s", diff)
	}
	if strings.Contains(a.String(), "status:") {
		t.Error("the YAML has a status")
	}
	errWrite := errors.New("disk full")
	if err := admission.WriteYAML(failingWriter{errWrite}, in); err != errWrite { //nolint:errorlint // the writer's error must come back unwrapped
		t.Errorf("WriteYAML to a failing writer = %v; want its error, unwrapped", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }
