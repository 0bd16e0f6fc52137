package loadbalancer

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	v1core "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/internal/clip"
)

// The reasons of the Warning events the Reconciler records (see the
// package doc, "Events"): one per class of error the user can fix.
const (
	// eventReasonBackendSkipped: a Node left out of the backends, on the
	// Node and on the Service (see Hooks.NodeSkipped).
	eventReasonBackendSkipped    = "LoadBalancerBackendSkipped"
	eventReasonInvalidAnnotation = "InvalidAnnotation"
	eventReasonInvalidService    = "InvalidService"
	eventReasonUnsupported       = "UnsupportedFeature"
	eventReasonNotOwned          = "LoadBalancerNotOwned"
	eventReasonNotFound          = "LoadBalancerNotFound"
)

// userErrorClasses are the user-fixable errors (Hooks.UserError) with the
// reason of their event, most specific first: an annotation asking for an
// undeclared feature is UnsupportedFeature, not InvalidAnnotation.
var userErrorClasses = []struct {
	err    error
	reason string
}{
	{ErrUnsupported, eventReasonUnsupported},
	{ErrNotOwned, eventReasonNotOwned},
	{ErrNotFound, eventReasonNotFound},
	{annotation.ErrInvalid, eventReasonInvalidAnnotation},
	{ErrInvalidService, eventReasonInvalidService},
}

// userErrorReason returns the event reason of err's class, and false when
// err is not the user's to fix (a cloud error, a throttle).
func userErrorReason(err error) (string, bool) {
	for _, c := range userErrorClasses {
		if errors.Is(err, c.err) {
			return c.reason, true
		}
	}
	return "", false
}

// maxEventMessage bounds an event's message: the error text, whose quoted
// values are already cut (cut), is cut again as a whole so that a long
// chain still fits what `kubectl describe` shows.
const maxEventMessage = 1024

// eventComponent is the source of the Reconciler's events, and the client
// it asks the cloud-controller-manager for: the service controller's, on
// whose behalf it acts (controllers/service/controller.go, New).
const eventComponent = "service-controller"

// Initialize implements provider.Initializer, which provider.Cloud calls
// from the cloud-controller-manager's Initialize: it starts an event
// broadcaster that records to the API server through
// clientBuilder.Client("service-controller"), so that the Reconciler
// records the Warning events of the package doc ("Events") on Services
// and Nodes for Hooks left nil. The broadcaster's goroutines stop when ctx
// is done, and so do the coalesced writes (Options.CoalesceWindow), which
// run with ctx (context.Background before Initialize). A client the
// builder cannot make is logged and leaves the Reconciler logging only.
// Calls after the first do nothing.
func (r *Reconciler) Initialize(ctx context.Context, clientBuilder cloudprovider.ControllerClientBuilder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.co.initialized {
		r.co.initialized, r.co.life = true, ctx // coalesced writes run, and stop, with it
	}
	if clientBuilder == nil || r.recorder != nil {
		return
	}
	client, err := clientBuilder.Client(eventComponent)
	if err != nil {
		klog.FromContext(ctx).Error(err, "No client for load-balancer events; user errors and Nodes left out of the backends are only logged")
		return
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&v1core.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		b.Shutdown()
	}()
	r.recorder = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: eventComponent})
}

// events returns the recorder Initialize started, or nil before it.
func (r *Reconciler) events() record.EventRecorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recorder
}

// reportUserError reports err, of the class of reason, from method op on
// svc: through Hooks.UserError when set, else, after Initialize, as a
// Warning event on svc whose message is the error text.
func (r *Reconciler) reportUserError(ctx context.Context, op string, svc *v1.Service, reason string, err error) {
	if r.opts.Hooks.UserError != nil {
		r.opts.Hooks.UserError(ctx, op, svc, err)
		return
	}
	if rec := r.events(); rec != nil {
		rec.Event(svc, v1.EventTypeWarning, reason, clip.Value(err.Error(), maxEventMessage))
	}
}

// reportSkipped says, once, that node is left out of svc's backends for
// reason: through Hooks.NodeSkipped when set, else in the log and, after
// Initialize, as a Warning event on the Node and one on svc.
func (r *Reconciler) reportSkipped(ctx context.Context, svc *v1.Service, node *v1.Node, reason error) {
	if r.opts.Hooks.NodeSkipped != nil {
		r.opts.Hooks.NodeSkipped(ctx, node, reason)
		return
	}
	klog.FromContext(ctx).Info("Node left out of load-balancer backends", "node", klog.KObj(node), "service", klog.KObj(svc), "providerID", cut(node.Spec.ProviderID), "reason", reason.Error())
	rec := r.events()
	if rec == nil {
		return
	}
	msg := clip.Value(reason.Error(), maxEventMessage)
	rec.Event(node, v1.EventTypeWarning, eventReasonBackendSkipped, "Left out of load-balancer backends: "+msg)
	rec.Event(svc, v1.EventTypeWarning, eventReasonBackendSkipped, fmt.Sprintf("Node %q left out of the load-balancer backends: %s", cut(node.Name), msg))
}
