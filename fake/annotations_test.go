package fake_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// declarations is what a generator reads from the fake's load balancers
// (package admission).
type declarations interface {
	Annotations() *annotation.Set
	Capabilities() loadbalancer.Capabilities
}

// TestDeclaredAnnotations: the fake declares one annotation of every kind,
// all under fake.ccmkit.io/, which it claims, none with a Default (a default would change the
// Settings of every existing load balancer), and hands them to its
// Reconciler, which reports them with the fake's capabilities.
func TestDeclaredAnnotations(t *testing.T) {
	c := newCloud(t, fake.Config{})
	d, ok := lbOf(t, c).(declarations)
	if !ok {
		t.Fatalf("the fake's LoadBalancer (%T) does not report its declarations", lbOf(t, c))
	}
	type decl struct {
		Name    string
		Kind    annotation.Kind
		Setting bool
	}
	var got []decl
	for _, a := range d.Annotations().All() {
		got = append(got, decl{Name: a.Name, Kind: a.Kind, Setting: a.Setting})
		if a.Default != "" {
			t.Errorf("annotation %q has Default %q; want none", a.Name, a.Default)
		}
	}
	want := []decl{
		{Name: "fake.ccmkit.io/algorithm", Kind: annotation.KindEnum, Setting: true},
		{Name: "fake.ccmkit.io/certificate", Kind: annotation.KindString, Setting: true},
		{Name: "fake.ccmkit.io/connection-limit", Kind: annotation.KindInt, Setting: true},
		{Name: "fake.ccmkit.io/health-check", Kind: annotation.KindString},
		{Name: "fake.ccmkit.io/health-check-source-ranges", Kind: annotation.KindCIDRList, Setting: true},
		{Name: "fake.ccmkit.io/https-redirect", Kind: annotation.KindBool, Setting: true},
		{Name: "fake.ccmkit.io/idle-timeout", Kind: annotation.KindDuration, Setting: true},
		{Name: "fake.ccmkit.io/load-balancer-id", Kind: annotation.KindString},
		{Name: "fake.ccmkit.io/protocol", Kind: annotation.KindEnum},
		{Name: "fake.ccmkit.io/proxy-protocol", Kind: annotation.KindBool, Setting: true},
		{Name: "fake.ccmkit.io/proxy-protocol-ports", Kind: annotation.KindBool, Setting: true},
		{Name: "fake.ccmkit.io/requested-ip", Kind: annotation.KindIP},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("declared annotations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"fake.ccmkit.io/"}, d.Annotations().Prefixes()); diff != "" {
		t.Errorf("claimed prefixes (-want +got):\n%s", diff)
	}
	for _, a := range d.Annotations().All() {
		if !strings.HasPrefix(a.Name, "fake.ccmkit.io/") {
			t.Errorf("annotation %q is not under the claimed prefix", a.Name)
		}
	}
	if diff := cmp.Diff(fake.AllLoadBalancerCapabilities, d.Capabilities()); diff != "" {
		t.Errorf("Capabilities of a default Cloud (-want +got):\n%s", diff)
	}
}

// TestAnnotationSettings: the settings a Service carries reach the cloud
// in canonical form, and a change of one is applied to the load balancer.
func TestAnnotationSettings(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	lb := lbOf(t, c)
	svc := service("tuned")
	svc.Annotations = map[string]string{
		"fake.ccmkit.io/algorithm":                  "least-connections",
		"fake.ccmkit.io/idle-timeout":               " 90s ",
		"fake.ccmkit.io/proxy-protocol":             "true",
		"fake.ccmkit.io/connection-limit":           "+0500",
		"fake.ccmkit.io/health-check-source-ranges": "10.0.0.1/8, 2001:db8::/32",
	}
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	want := map[string]string{
		"fake.ccmkit.io/algorithm":                  "least-connections",
		"fake.ccmkit.io/idle-timeout":               "1m30s",
		"fake.ccmkit.io/proxy-protocol":             "true",
		"fake.ccmkit.io/connection-limit":           "500",
		"fake.ccmkit.io/health-check-source-ranges": "10.0.0.0/8,2001:db8::/32",
	}
	checkSettings(t, c, svc, want)

	svc.Annotations["fake.ccmkit.io/algorithm"] = "round-robin"
	want["fake.ccmkit.io/algorithm"] = "round-robin"
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer after a change: %v", err)
	}
	checkSettings(t, c, svc, want)
}

func checkSettings(t *testing.T, c *fake.Cloud, svc *v1.Service, want map[string]string) {
	t.Helper()
	got, ok := c.LoadBalancerFor(cluster, svc)
	if !ok {
		t.Fatalf("service %s has no load balancer", svc.Name)
	}
	if diff := cmp.Diff(want, got.Spec.Settings); diff != "" {
		t.Errorf("Spec.Settings (-want +got):\n%s", diff)
	}
}

// TestAnnotationErrors: a malformed declared annotation, a stored ID that
// names no load balancer or another Service's, and a requested address,
// each reach the Reconciler through the fake's wiring.
func TestAnnotationErrors(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	lb := lbOf(t, c)
	other := service("other")
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, other, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer(other): %v", err)
	}
	otherLB, _ := c.LoadBalancerFor(cluster, other)
	for _, tc := range []struct {
		name, reason string
		annotations  map[string]string
		wantErr      error
		wantText     string
	}{
		{name: "malformed", reason: "a declared annotation is validated before any cloud call",
			annotations: map[string]string{"fake.ccmkit.io/connection-limit": "0"}, wantErr: annotation.ErrInvalid,
			wantText: `annotation "fake.ccmkit.io/connection-limit": invalid value "0": expected an integer from 1 to 100000`},
		{name: "unknown ID", reason: "the ID annotation is the first step of the lookup",
			annotations: map[string]string{"fake.ccmkit.io/load-balancer-id": "lb-none"}, wantErr: loadbalancer.ErrNotFound, wantText: "lb-none"},
		{name: "another's ID", reason: "a load balancer owned by another Service is never adopted",
			annotations: map[string]string{"fake.ccmkit.io/load-balancer-id": otherLB.ID}, wantErr: loadbalancer.ErrNotOwned, wantText: otherLB.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := service("svc-" + strings.ReplaceAll(tc.name, " ", "-"))
			svc.Annotations = tc.annotations
			_, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("%s: EnsureLoadBalancer error = %v; want %v containing %q", tc.reason, err, tc.wantErr, tc.wantText)
			}
			if got, ok := c.LoadBalancerFor(cluster, svc); ok {
				t.Errorf("%s: the Service got load balancer %s; want none", tc.reason, got.ID)
			}
		})
	}

	t.Run("requested IP", func(t *testing.T) {
		svc := service("pinned")
		svc.Annotations = map[string]string{"fake.ccmkit.io/requested-ip": "198.18.7.7"}
		if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
			t.Fatalf("EnsureLoadBalancer: %v", err)
		}
		got, _ := c.LoadBalancerFor(cluster, svc)
		if diff := cmp.Diff([]string{"198.18.7.7"}, got.VIPs); diff != "" {
			t.Errorf("the requested address is the VIP (-want +got):\n%s", diff)
		}
	})
}

// TestMisspeltAnnotation: under the fake's claimed prefix, a misspelt or
// wrongly cased annotation stops EnsureLoadBalancer before any cloud
// call, with an error (an invalid annotation: the service controller
// records it as a Warning event and retries) naming the key and the
// declared annotation it most likely means; one under another prefix is
// still ignored.
func TestMisspeltAnnotation(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	lb := lbOf(t, c)
	for _, tc := range []struct {
		name, reason, key, want string
	}{
		{name: "misspelt", reason: "the closest declared name", key: "fake.ccmkit.io/helth-check",
			want: `annotation "fake.ccmkit.io/helth-check": not declared under prefix "fake.ccmkit.io/": expected a declared annotation, such as "fake.ccmkit.io/health-check"`},
		{name: "wrong case", reason: "names are case-sensitive", key: "fake.ccmkit.io/Health-Check",
			want: `annotation "fake.ccmkit.io/Health-Check": not declared under prefix "fake.ccmkit.io/": expected "fake.ccmkit.io/health-check" (annotation names are case-sensitive)`},
		{name: "wrong case of the domain", reason: "the API server accepts it", key: "Fake.ccmkit.io/algorithm",
			want: `annotation "Fake.ccmkit.io/algorithm": not declared under prefix "fake.ccmkit.io/": expected "fake.ccmkit.io/algorithm" (annotation names are case-sensitive)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := service("svc-" + strings.ReplaceAll(tc.name, " ", "-"))
			svc.Annotations = map[string]string{tc.key: "tcp"}
			c.ResetCalls()
			_, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
			if !errors.Is(err, annotation.ErrInvalid) || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: EnsureLoadBalancer error = %v; want annotation.ErrInvalid containing %q", tc.reason, err, tc.want)
			}
			if calls := c.Calls(); calls.Reads+calls.Writes != 0 {
				t.Errorf("%s: %d reads and %d writes of the cloud API; want none (%v)", tc.reason, calls.Reads, calls.Writes, calls.ByOp)
			}
			if got, ok := c.LoadBalancerFor(cluster, svc); ok {
				t.Errorf("%s: the Service got load balancer %s; want none", tc.reason, got.ID)
			}
		})
	}
	svc := service("foreign")
	svc.Annotations = map[string]string{"other.example.com/helth-check": "x", "service.beta.kubernetes.io/fake-anything": "y"}
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Errorf("EnsureLoadBalancer with annotations under other prefixes: %v; want them ignored", err)
	}
}
