package loadbalancer_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// A provider's per-port health-check annotation.
var (
	hcAnns = annotation.Set{}
	hcAnn  = hcAnns.MustDeclare(annotation.Annotation{Name: "lb.example.com/health-check", Kind: annotation.KindString, PerPort: true,
		Doc: "The health check of each listed port's pool: tcp, or http:/path."})
)

var poolCaps = loadbalancer.Capabilities{ListenerPools: true, NodePortless: true}

func hcInput(caps loadbalancer.Capabilities) loadbalancer.DesiredInput {
	return loadbalancer.DesiredInput{Cluster: "c1", Capabilities: caps, Annotations: &hcAnns, HealthCheckAnnotation: hcAnn}
}

// poolHealth returns the health check of each listener's pool, by port.
func poolHealth(lb *loadbalancer.LoadBalancer) map[int32]loadbalancer.HealthCheck {
	out := map[int32]loadbalancer.HealthCheck{}
	for _, l := range lb.Spec.Listeners {
		if l.Pool != nil && l.Pool.HealthCheck != nil {
			out[l.Port] = *l.Pool.HealthCheck
		}
	}
	return out
}

// TestDesiredPortHealthCheck: a port listed in the health-check annotation
// gets a pool health check of its own on its node port; the others keep
// the Service's (kube-proxy's, for externalTrafficPolicy Cluster).
func TestDesiredPortHealthCheck(t *testing.T) {
	service := loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"}
	for _, tc := range []struct {
		value string
		want  map[int32]loadbalancer.HealthCheck
	}{
		{"", map[int32]loadbalancer.HealthCheck{80: service, 443: service}},
		{"https=http:/ready", map[int32]loadbalancer.HealthCheck{80: service, 443: {Protocol: loadbalancer.HealthCheckHTTP, Port: 30443, Path: "/ready"}}},
		{"80=tcp, 443=http:/v1/health", map[int32]loadbalancer.HealthCheck{
			80:  {Protocol: loadbalancer.HealthCheckTCP, Port: 30080},
			443: {Protocol: loadbalancer.HealthCheckHTTP, Port: 30443, Path: "/v1/health"}}},
	} {
		anns := map[string]string{}
		if tc.value != "" {
			anns[hcAnn.Name] = tc.value
		}
		lb, err := loadbalancer.Desired(twoPorts(anns), nil, hcInput(poolCaps))
		if err != nil {
			t.Fatalf("%q: %v", tc.value, err)
		}
		if diff := cmp.Diff(tc.want, poolHealth(lb)); diff != "" {
			t.Errorf("%q: pool health checks (-want +got):\n%s", tc.value, diff)
		}
		if lb.Spec.HealthCheck != service {
			t.Errorf("%q: Spec.HealthCheck %+v; want the Service's %+v", tc.value, lb.Spec.HealthCheck, service)
		}
	}
}

// TestDesiredPortHealthCheckErrors: a malformed value, a port the Service
// does not have, a port without a node port and a flat load balancer are
// each an error naming the annotation, the port and value, and what was
// expected; a provider misusing HealthCheckAnnotation is told which way.
func TestDesiredPortHealthCheckErrors(t *testing.T) {
	for _, tc := range []struct {
		name, value  string
		caps         loadbalancer.Capabilities
		nodePortless bool
		is           error
		want         []string
	}{
		{name: "udp check", value: "443=udp", caps: poolCaps, is: loadbalancer.ErrInvalidService,
			want: []string{hcAnn.Name, "port 443/TCP", `"udp"`, `expected "tcp" or "http:"`}},
		{name: "relative path", value: "443=http:ready", caps: poolCaps, is: loadbalancer.ErrInvalidService,
			want: []string{"port 443/TCP", `path "ready" is not absolute`}},
		{name: "query in path", value: "80=http:/ready?x=1", caps: poolCaps, is: loadbalancer.ErrInvalidService,
			want: []string{"port 80/TCP", "'?'", "plain URL path"}},
		{name: "long path", value: "80=http:/" + strings.Repeat("a", 1100), caps: poolCaps, is: loadbalancer.ErrInvalidService,
			want: []string{"port 80/TCP", "path of 1101 bytes: expected at most 1024"}},
		{name: "unknown port", value: "8443=tcp", caps: poolCaps, want: []string{hcAnn.Name, "8443", "443"}},
		{name: "flat load balancer", value: "443=tcp", caps: loadbalancer.Capabilities{}, is: loadbalancer.ErrUnsupported,
			want: []string{"ListenerPools", hcAnn.Name, "port 443/TCP", "one health check for every port"}},
		{name: "no node port", value: "443=tcp", caps: poolCaps, nodePortless: true, is: loadbalancer.ErrInvalidService,
			want: []string{"port 443/TCP has no node port", "expected no health check of its own"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := twoPorts(map[string]string{hcAnn.Name: tc.value})
			if tc.nodePortless {
				svc.Spec.AllocateLoadBalancerNodePorts = ptr(false)
				for i := range svc.Spec.Ports {
					svc.Spec.Ports[i].NodePort = 0
				}
			}
			_, err := loadbalancer.Desired(svc, nil, hcInput(tc.caps))
			if err == nil {
				t.Fatal("Desired = nil error; want one")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Desired = %v; want errors.Is %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Desired = %v; want it to contain %q", err, w)
				}
			}
		})
	}

	for _, tc := range []struct {
		name string
		a    annotation.Annotation
		want string
	}{
		{"not per port", annotation.Annotation{Name: "x.example.com/hc", Kind: annotation.KindString, Doc: "d"}, "expected a per-port string annotation"},
		{"a setting", annotation.Annotation{Name: "x.example.com/hc", Kind: annotation.KindString, PerPort: true, Setting: true, Doc: "d"}, "is a Setting"},
		{"bad default", annotation.Annotation{Name: "x.example.com/hc", Kind: annotation.KindString, PerPort: true, Default: "ping", Doc: "d"}, `default: health check "ping"`},
		{"default on a flat load balancer", annotation.Annotation{Name: "x.example.com/hc", Kind: annotation.KindString, PerPort: true, Default: "tcp", Doc: "d"}, "Capabilities.ListenerPools is false"},
	} {
		var set annotation.Set
		a := set.MustDeclare(tc.a)
		caps := poolCaps
		if tc.a.Default == "tcp" {
			caps = loadbalancer.Capabilities{}
		}
		_, err := loadbalancer.NewReconciler(newMemDriver(), loadbalancer.Options{Capabilities: caps, Annotations: &set, HealthCheckAnnotation: a})
		if err == nil || !strings.Contains(err.Error(), "Options.HealthCheckAnnotation") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewReconciler = %v; want an error naming Options.HealthCheckAnnotation and %q", tc.name, err, tc.want)
		}
	}
	var other annotation.Set
	undeclared := other.MustDeclare(annotation.Annotation{Name: "x.example.com/hc", Kind: annotation.KindString, PerPort: true, Doc: "d"})
	if _, err := loadbalancer.NewReconciler(newMemDriver(), loadbalancer.Options{Capabilities: poolCaps, Annotations: &hcAnns, HealthCheckAnnotation: undeclared}); err == nil || !strings.Contains(err.Error(), "not declared in Options.Annotations") {
		t.Errorf("NewReconciler with an undeclared HealthCheckAnnotation = %v; want an error saying so", err)
	}
}

// TestPlanPortHealthCheckChange: changing one port's health check is one
// write, to that listener's pool, leaving the other listener as it was.
func TestPlanPortHealthCheckChange(t *testing.T) {
	desired := func(value string) *loadbalancer.LoadBalancer {
		t.Helper()
		lb, err := loadbalancer.Desired(twoPorts(map[string]string{hcAnn.Name: value}), threeNodes(), hcInput(poolCaps))
		if err != nil {
			t.Fatal(err)
		}
		return lb
	}
	actual := desired("443=http:/ready")
	actual.ID = "lb-1"
	actions, err := loadbalancer.Plan(desired("443=http:/v2/ready"), actual)
	if err != nil {
		t.Fatal(err)
	}
	if len(actions) != 1 || actions[0].Kind != loadbalancer.ActionUpdateHealthCheck || actions[0].Listener == nil || actions[0].Listener.Port != 443 {
		t.Fatalf("Plan = %+v; want one UpdateHealthCheck of the 443 listener's pool", actions)
	}
	if hc := actions[0].HealthCheck; hc == nil || hc.Path != "/v2/ready" || hc.Port != 30443 {
		t.Errorf("health check %+v; want HTTP /v2/ready on node port 30443", hc)
	}
	if actions, err := loadbalancer.Plan(desired("443=http:/ready"), actual); err != nil || len(actions) != 0 {
		t.Errorf("Plan of the same = %v, %v; want nothing", actions, err)
	}
}
