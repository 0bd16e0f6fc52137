package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/ccmkit/ccmkit/admission"
	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// policyManifest is the fake's generated admission policy
// (example/cmd/admission-policy), relative to this package.
const policyManifest = "../../example/deploy/admission-policy.yaml"

// TestAdmission: the fake's generated ValidatingAdmissionPolicy on the real
// kube-apiserver, bound to the scenario's namespace only (other scenarios
// create Services at the same time). The apiserver accepts and type-checks
// it (the CEL's cost too), and refuses a LoadBalancer Service with a
// malformed declared annotation of each kind, or with a spec.loadBalancerIP
// the Reconciler cannot use, with the Reconciler's own message; it admits
// valid values, Services out of the policy's scope, and an edit of a
// Service made before the policy that leaves its malformed annotation as
// it was. A second policy, generated for a provider without any optional
// feature, refuses each feature with the Reconciler's UnsupportedError.
func TestAdmission(t *testing.T) {
	s := newScenario(t, "admission")
	set := fakeAnnotations(t)
	policy, binding := readPolicy(t, policyManifest)

	// Made before the policy: the apiserver takes anything.
	legacy := s.createService(annotatedService(s.ns, "legacy", "fake.ccmkit.io/proxy-protocol", "yes"))

	s.enforce(policy, binding)

	t.Run("malformed annotations", func(t *testing.T) {
		for _, tc := range []struct {
			name, reason, key, value string
		}{
			{name: "bool", reason: "true or false", key: "fake.ccmkit.io/proxy-protocol", value: "yes"},
			{name: "int", reason: "out of bounds", key: "fake.ccmkit.io/connection-limit", value: "0"},
			{name: "duration", reason: "negative", key: "fake.ccmkit.io/idle-timeout", value: "-30s"},
			{name: "enum", reason: "not a value", key: "fake.ccmkit.io/algorithm", value: "random"},
			{name: "IP", reason: "not an address", key: "fake.ccmkit.io/requested-ip", value: "10.0.0.300"},
			{name: "CIDR list", reason: "an empty entry", key: "fake.ccmkit.io/health-check-source-ranges", value: "10.0.0.0/8, "},
			{name: "string", reason: "blank", key: "fake.ccmkit.io/load-balancer-id", value: " "},
			{name: "quoting", reason: "escapes and an invisible character, quoted as Go does", key: "fake.ccmkit.io/proxy-protocol", value: "\u200btrue\t\"x\""},
			{name: "huge", reason: "200 KiB: within the apiserver's CEL cost, cut in the message", key: "fake.ccmkit.io/idle-timeout", value: strings.Repeat("9", 200<<10) + "x"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				svc := annotatedService(s.ns, serviceName("bad", tc.name), tc.key, tc.value)
				refused(t, svc, reconcilerSays(t, svc, set, allCapabilities))
			})
		}
	})

	t.Run("valid", func(t *testing.T) {
		svc := workload.LoadBalancerService(s.ns, "valid", 80)
		svc.Annotations = map[string]string{
			"fake.ccmkit.io/proxy-protocol":             " true ",
			"fake.ccmkit.io/connection-limit":           "100000",
			"fake.ccmkit.io/idle-timeout":               "1m30s",
			"fake.ccmkit.io/algorithm":                  "least-connections",
			"fake.ccmkit.io/requested-ip":               "::ffff:198.18.0.9",
			"fake.ccmkit.io/health-check-source-ranges": "10.0.0.1/8,2001:db8::/32",
			"fake.ccmkit.io/load-balancer-id":           "lb-42",
		}
		svc.Spec.LoadBalancerIP = "198.18.0.9"
		if diff := cmp.Diff([]string(nil), reconcilerSays(t, svc, set, allCapabilities)); diff != "" {
			t.Fatalf("the Reconciler refuses the valid Service (-want +got):\n%s", diff)
		}
		admitted(t, svc)
	})

	t.Run("out of scope", func(t *testing.T) {
		clusterIP := annotatedService(s.ns, "cluster-ip", "fake.ccmkit.io/proxy-protocol", "yes")
		clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
		admitted(t, clusterIP)
		classed := annotatedService(s.ns, "classed", "fake.ccmkit.io/proxy-protocol", "yes")
		classed.Spec.LoadBalancerClass = ptr.To("example.com/other")
		admitted(t, classed)
	})

	t.Run("loadBalancerIP", func(t *testing.T) {
		svc := workload.LoadBalancerService(s.ns, "bad-ip", 80)
		svc.Spec.LoadBalancerIP = "not-an-ip" // the apiserver itself takes it
		refused(t, svc, reconcilerSays(t, svc, set, allCapabilities))
	})

	t.Run("source-ranges annotation", func(t *testing.T) {
		// Not the policy's: the apiserver's Service validation refuses it
		// first, as the package doc of admission says.
		svc := annotatedService(s.ns, "bad-ranges", corev1.AnnotationLoadBalancerSourceRangesKey, "10.0.0.0/33")
		_, err := shared.client.CoreV1().Services(s.ns).Create(t.Context(), svc, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			t.Fatalf("creating a Service with source ranges %q: %v; want the apiserver's own validation error", "10.0.0.0/33", err)
		}
	})

	t.Run("edit of a Service made before", func(t *testing.T) {
		got := updated(t, legacy.Namespace, legacy.Name, func(svc *corev1.Service) { svc.Labels = map[string]string{"edited": "yes"} })
		if err := got; err != nil {
			t.Fatalf("an edit that keeps the old malformed annotation: %v; want it admitted", err)
		}
		err := updated(t, legacy.Namespace, legacy.Name, func(svc *corev1.Service) { svc.Annotations["fake.ccmkit.io/proxy-protocol"] = "no" })
		want := `annotation "fake.ccmkit.io/proxy-protocol": invalid value "no": expected "true" or "false"`
		if !isDenial(err, want) {
			t.Fatalf("an edit to another malformed value: %v; want the policy's denial %q", err, want)
		}
	})

	// A provider without any optional feature: every feature a Service
	// asks for is refused.
	u := newScenario(t, "admission-unsupported")
	p, b, err := admission.Policy(admission.PolicyInput{Name: "ccmkit-unsupported-service-load-balancer", Annotations: set})
	if err != nil {
		t.Fatal(err)
	}
	u.enforce(p, b)
	t.Run("unsupported", func(t *testing.T) {
		for _, tc := range []struct {
			name, reason string
			mod          func(*corev1.Service)
		}{
			{name: "SCTP", reason: "an SCTP port", mod: func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolSCTP }},
			{name: "UDP and TCP", reason: "the UDP port is named first", mod: func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
			}},
			{name: "client IP", reason: "ClientIP affinity", mod: func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }},
			{name: "node-portless", reason: "no node ports", mod: func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false) }},
			{name: "source ranges", reason: "listed sorted", mod: func(s *corev1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"192.168.0.0/16", "10.0.0.0/8", "10.0.0.0/16"}
			}},
			{name: "requested IP", reason: "spec.loadBalancerIP", mod: func(s *corev1.Service) { s.Spec.LoadBalancerIP = "198.18.0.7" }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				svc := workload.LoadBalancerService(u.ns, serviceName("unsupported", tc.name), 80)
				tc.mod(svc)
				want := reconcilerSays(t, svc, set, loadbalancer.Capabilities{})
				if len(want) == 0 || !strings.Contains(want[0], "is not supported by this provider") {
					t.Fatalf("%s: the Reconciler says %q; want an UnsupportedError first", tc.reason, want)
				}
				refused(t, svc, want)
			})
		}
		admitted(t, workload.LoadBalancerService(u.ns, "plain", 80))
	})
}

// allCapabilities are the fake's (fake.AllLoadBalancerCapabilities is only
// exported to its tests): every feature.
var allCapabilities = loadbalancer.Capabilities{UDP: true, SCTP: true, MixedProtocols: true, DualStack: true,
	NodePortless: true, SourceRanges: true, ClientIPAffinity: true, RequestedIP: true}

// fakeAnnotations returns the fake's declared annotations, read from its
// Reconciler as the generator reads them.
func fakeAnnotations(t *testing.T) *annotation.Set {
	t.Helper()
	c, err := fake.New(fake.Config{}, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	lbs, _ := c.LoadBalancer()
	d, ok := lbs.(interface{ Annotations() *annotation.Set })
	if !ok {
		t.Fatalf("the fake's LoadBalancer (%T) does not report its annotations", lbs)
	}
	return d.Annotations()
}

// serviceName is a Service name (a DNS label) for a case.
func serviceName(prefix, name string) string {
	return prefix + "-" + strings.ToLower(strings.ReplaceAll(name, " ", "-"))
}

// annotatedService is a one-port LoadBalancer Service with one annotation.
func annotatedService(ns, name, key, value string) *corev1.Service {
	svc := workload.LoadBalancerService(ns, name, 80)
	svc.Annotations = map[string]string{key: value}
	return svc
}

// reconcilerSays returns the messages the Reconciler (loadbalancer.Desired)
// has for svc as the apiserver hands it to admission: node ports
// allocated, IPv4 only in this cluster. None when it takes it.
func reconcilerSays(t *testing.T, svc *corev1.Service, set *annotation.Set, caps loadbalancer.Capabilities) []string {
	t.Helper()
	as := svc.DeepCopy()
	for i := range as.Spec.Ports {
		if as.Spec.Ports[i].NodePort == 0 && (as.Spec.AllocateLoadBalancerNodePorts == nil || *as.Spec.AllocateLoadBalancerNodePorts) {
			as.Spec.Ports[i].NodePort = int32(30000 + i)
		}
	}
	as.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	as.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	_, err := loadbalancer.Desired(as, nil, loadbalancer.DesiredInput{Cluster: "e2e", Capabilities: caps, Annotations: set})
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

// readPolicy decodes the policy and the binding of a generated manifest.
func readPolicy(t *testing.T, path string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%s has %d YAML documents, want 2 (the policy, the binding)", path, len(docs))
	}
	var p admissionregistrationv1.ValidatingAdmissionPolicy
	var pb admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &p); err != nil {
		t.Fatalf("%s: the policy: %v", path, err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &pb); err != nil {
		t.Fatalf("%s: the binding: %v", path, err)
	}
	if p.Kind != "ValidatingAdmissionPolicy" || pb.Kind != "ValidatingAdmissionPolicyBinding" || pb.Spec.PolicyName != p.Name {
		t.Fatalf("%s: %s %q and %s %q of policy %q; want a policy and its binding", path, p.Kind, p.Name, pb.Kind, pb.Name, pb.Spec.PolicyName)
	}
	return &p, &pb
}

// enforce creates the policy and its binding under names of the
// scenario's own, the binding limited to the scenario's namespace (its
// kubernetes.io/metadata.name label), checks that the apiserver's type
// checker finds nothing to say, and waits until the policy refuses a
// Service. Its cleanup deletes both.
func (s *scenario) enforce(p *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	s.t.Helper()
	p, b = p.DeepCopy(), b.DeepCopy()
	p.Name = "e2e-" + s.name
	b.Name, b.Spec.PolicyName = p.Name, p.Name
	b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{corev1.LabelMetadataName: s.ns},
	}}
	api := shared.client.AdmissionregistrationV1()
	created, err := api.ValidatingAdmissionPolicies().Create(s.t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatalf("the apiserver refuses the policy: %v", err)
	}
	s.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := api.ValidatingAdmissionPolicyBindings().Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			s.t.Errorf("cleanup: deleting binding %s: %v", b.Name, err)
		}
		if err := api.ValidatingAdmissionPolicies().Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			s.t.Errorf("cleanup: deleting policy %s: %v", p.Name, err)
		}
	})
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(s.t.Context(), b, metav1.CreateOptions{}); err != nil {
		s.t.Fatalf("the apiserver refuses the binding: %v", err)
	}
	s.typeCheck(created)

	probe := annotatedService(s.ns, "probe", "fake.ccmkit.io/proxy-protocol", "yes")
	want := `annotation "fake.ccmkit.io/proxy-protocol": invalid value "yes": expected "true" or "false"`
	s.poll(changeTimeout, fmt.Sprintf("policy %s to refuse a Service in %s", p.Name, s.ns), func(ctx context.Context) (bool, string) {
		_, err := shared.client.CoreV1().Services(s.ns).Create(ctx, probe, metav1.CreateOptions{})
		if err == nil {
			// Not loaded yet: the probe went through.
			if err := shared.client.CoreV1().Services(s.ns).Delete(ctx, probe.Name, metav1.DeleteOptions{}); err != nil {
				return false, "deleting the probe: " + err.Error()
			}
			return false, "the probe Service was admitted"
		}
		return isDenial(err, want), err.Error()
	})
}

// typeCheck runs on p what the apiserver's ValidatingAdmissionPolicy status
// controller runs (kube-controller-manager, which this control plane does
// not start, so status.typeChecking stays unset): the type checker of
// k8s.io/apiserver with the apiserver's OpenAPI schema of Services, and
// fails the test on any warning. A broken expression must warn, or the
// check proves nothing.
func (s *scenario) typeCheck(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	s.t.Helper()
	dc := shared.client.Discovery()
	checker := &validating.TypeChecker{
		SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: dc},
		RestMapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
	}
	if w := checker.Check(p); len(w) > 0 {
		s.t.Errorf("the type checker warns about policy %s: %+v", p.Name, w)
	}
	broken := p.DeepCopy()
	broken.Spec.Validations = append(broken.Spec.Validations, admissionregistrationv1.Validation{Expression: "object.spec.noSuchField == 1"})
	if w := checker.Check(broken); len(w) != 1 {
		s.t.Errorf("the type checker has %d warnings for a policy with a field Services do not have, want 1: it did not read the schema", len(w))
	}
	if p.Status.TypeChecking != nil && len(p.Status.TypeChecking.ExpressionWarnings) > 0 {
		s.t.Errorf("policy %s: status.typeChecking: %+v", p.Name, p.Status.TypeChecking.ExpressionWarnings)
	}
}

// isDenial reports whether err is a ValidatingAdmissionPolicy's denial
// (reason Invalid) whose message is want.
func isDenial(err error, want string) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") && strings.HasSuffix(err.Error(), " denied request: "+want)
}

// refused fails t unless creating svc is refused by the policy with the
// first of the Reconciler's messages (the one the apiserver shows).
func refused(t *testing.T, svc *corev1.Service, reconciler []string) {
	t.Helper()
	if len(reconciler) == 0 {
		t.Fatalf("the Reconciler takes Service %s: the case is not what it says", svc.Name)
	}
	_, err := shared.client.CoreV1().Services(svc.Namespace).Create(t.Context(), svc, metav1.CreateOptions{})
	if !isDenial(err, reconciler[0]) {
		t.Errorf("creating Service %s: %v; want the policy's denial with the Reconciler's message %q", svc.Name, err, reconciler[0])
	}
}

// admitted fails t unless creating svc succeeds.
func admitted(t *testing.T, svc *corev1.Service) {
	t.Helper()
	if _, err := shared.client.CoreV1().Services(svc.Namespace).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating Service %s: %v; want it admitted", svc.Name, err)
	}
}

// updated applies mutate to the current Service and updates it, retrying
// on conflicts, and returns the update's error.
func updated(t *testing.T, ns, name string, mutate func(*corev1.Service)) error {
	t.Helper()
	for attempt := 0; ; attempt++ {
		svc, err := shared.client.CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(svc)
		_, err = shared.client.CoreV1().Services(ns).Update(t.Context(), svc, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) || attempt > 10 {
			return err
		}
	}
}
