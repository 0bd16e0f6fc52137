package loadbalancer_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// TestUserErrorEvents: without Hooks.UserError, each class of error the
// user can fix gets a Warning event on the Service, with its own reason
// and the error text as message; a cloud error gets none, and a hook
// replaces the event.
func TestUserErrorEvents(t *testing.T) {
	set, byKind := testAnnotations(t)
	idAnn := byKind[annotation.KindString]
	withAnn := func(name, value string) func(*v1.Service) {
		return func(s *v1.Service) { s.Annotations = map[string]string{name: value} }
	}
	foreign := &loadbalancer.LoadBalancer{ID: "lb-b", Name: "theirs",
		Tags: loadbalancer.OwnerTags(loadbalancer.OwnerOf("cluster-b", lbService()))}
	for _, tc := range []struct {
		name     string
		opts     loadbalancer.Options
		svc      *v1.Service
		cloud    []*loadbalancer.LoadBalancer // stored before the call
		applyErr error                        // of every Driver.Apply
		want     []event                      // Message: a part of it
		reason   string
	}{{
		name:   "malformed annotation",
		opts:   loadbalancer.Options{Annotations: set},
		svc:    lbService(withAnn("lb.example.com/algorithm", "fastest")),
		want:   []event{{Kind: "Service", Name: "shop/web", Type: v1.EventTypeWarning, Reason: loadbalancer.EventReasonInvalidAnnotation, Message: `invalid value "fastest": expected one of`}},
		reason: "annotation.ErrInvalid, naming the annotation, the value and what was expected",
	}, {
		name:   "invalid field",
		svc:    lbService(func(s *v1.Service) { s.Spec.LoadBalancerIP = "not-an-ip" }),
		want:   []event{{Kind: "Service", Name: "shop/web", Type: v1.EventTypeWarning, Reason: loadbalancer.EventReasonInvalidService, Message: `spec.loadBalancerIP "not-an-ip": expected an IPv4 or IPv6 address`}},
		reason: "ErrInvalidService, naming the field",
	}, {
		name: "unsupported feature",
		opts: loadbalancer.Options{Capabilities: loadbalancer.Capabilities{SourceRanges: true}},
		svc: lbService(func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053})
		}),
		want:   []event{{Kind: "Service", Name: "shop/web", Type: v1.EventTypeWarning, Reason: loadbalancer.EventReasonUnsupported, Message: "Capabilities.UDP is false"}},
		reason: "ErrUnsupported: UDP is not declared",
	}, {
		name:   "owned by another cluster",
		opts:   loadbalancer.Options{Annotations: set, IDAnnotation: idAnn},
		svc:    lbService(withAnn(idAnn.Name, "lb-b")),
		cloud:  []*loadbalancer.LoadBalancer{foreign},
		want:   []event{{Kind: "Service", Name: "shop/web", Type: v1.EventTypeWarning, Reason: loadbalancer.EventReasonNotOwned, Message: `owned by cluster "cluster-b"`}},
		reason: "ErrNotOwned: the stored ID names another cluster's load balancer",
	}, {
		name:   "stored ID does not exist",
		opts:   loadbalancer.Options{Annotations: set, IDAnnotation: idAnn},
		svc:    lbService(withAnn(idAnn.Name, "lb-gone")),
		want:   []event{{Kind: "Service", Name: "shop/web", Type: v1.EventTypeWarning, Reason: loadbalancer.EventReasonNotFound, Message: `names load balancer id "lb-gone", which does not exist: expected`}},
		reason: "ErrNotFound from EnsureLoadBalancer",
	}, {
		name:     "cloud error",
		svc:      lbService(),
		applyErr: errors.New("500 internal server error"),
		reason:   "a failing cloud is not the user's to fix: no event",
	}, {
		name: "hook set",
		opts: loadbalancer.Options{Annotations: set, Hooks: loadbalancer.Hooks{
			UserError: func(context.Context, string, *v1.Service, error) {}}},
		svc:    lbService(withAnn("lb.example.com/algorithm", "fastest")),
		reason: "Hooks.UserError replaces the event",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r, d := newReconciler(t, tc.opts)
			for _, lb := range tc.cloud {
				d.lbs[lb.ID] = lb.Clone()
			}
			d.onApply = func(loadbalancer.Action) error { return tc.applyErr }
			log := &eventLog{}
			loadbalancer.SetRecorder(r, log)
			if _, err := r.EnsureLoadBalancer(t.Context(), "c1", tc.svc, threeNodes()); err == nil {
				t.Fatalf("EnsureLoadBalancer succeeded; want an error (%s)", tc.reason)
			}
			got := log.take()
			for i := range got {
				if i < len(tc.want) && strings.Contains(got[i].Message, tc.want[i].Message) {
					got[i].Message = tc.want[i].Message
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got), Message being a part of the message: %s:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSkippedNodeServiceEvent: a Node left out of the backends gets a
// Warning event on itself and one on the Service of the call, once per
// Node and reason whatever the calls and Services.
func TestSkippedNodeServiceEvent(t *testing.T) {
	r, _ := newReconciler(t, loadbalancer.Options{Codec: provider.Codec{Scheme: "test"}})
	log := &eventLog{}
	loadbalancer.SetRecorder(r, log)
	bad := node("aws-node", "10.0.0.9")
	bad.Spec.ProviderID = "aws:///eu-west-1a/i-0abc"
	other := lbService(func(s *v1.Service) { s.Name, s.UID = "api", "uid-api" })
	for _, svc := range []*v1.Service{lbService(), lbService(), other} {
		if _, err := r.EnsureLoadBalancer(t.Context(), "c1", svc, append(threeNodes(), bad)); err != nil {
			t.Fatalf("EnsureLoadBalancer %s: %v", svc.Name, err)
		}
	}
	if err := r.UpdateLoadBalancer(t.Context(), "c1", other, append(threeNodes(), bad)); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	got := log.take()
	want := []event{
		{Kind: "Node", Name: "aws-node", Type: v1.EventTypeWarning, Reason: loadbalancer.EventReasonBackendSkipped},
		{Kind: "Service", Name: "shop/web", Type: v1.EventTypeWarning, Reason: loadbalancer.EventReasonBackendSkipped},
	}
	for i := range got {
		if !strings.Contains(got[i].Message, "aws:///eu-west-1a/i-0abc") {
			t.Errorf("event %d message %q does not name the provider ID", i, got[i].Message)
		}
		if got[i].Kind == "Service" && !strings.Contains(got[i].Message, `"aws-node"`) {
			t.Errorf("the Service's event %q does not name the Node", got[i].Message)
		}
		got[i].Message = ""
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got): one on the Node and one on the first Service, once:\n%s", diff)
	}
}

// TestSkippedNodeHookReplacesEvents: Hooks.NodeSkipped replaces both
// events.
func TestSkippedNodeHookReplacesEvents(t *testing.T) {
	var hooked []string
	r, _ := newReconciler(t, loadbalancer.Options{Codec: provider.Codec{Scheme: "test"}, Hooks: loadbalancer.Hooks{
		NodeSkipped: func(_ context.Context, n *v1.Node, reason error) { hooked = append(hooked, n.Name) }}})
	log := &eventLog{}
	loadbalancer.SetRecorder(r, log)
	bad := node("aws-node", "10.0.0.9")
	bad.Spec.ProviderID = "aws:///eu-west-1a/i-0abc"
	mustEnsure(t, r, "c1", lbService(), append(threeNodes(), bad))
	if diff := cmp.Diff([]string{"aws-node"}, hooked); diff != "" {
		t.Errorf("NodeSkipped calls (-want +got):\n%s", diff)
	}
	if got := log.take(); len(got) != 0 {
		t.Errorf("events %v; want none when Hooks.NodeSkipped is set", got)
	}
}
