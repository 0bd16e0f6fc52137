package loadbalancer

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	v1core "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// eventReasonBackendSkipped is the reason of the Warning event recorded on
// a Node left out of the load-balancer backends (see Hooks.NodeSkipped).
const eventReasonBackendSkipped = "LoadBalancerBackendSkipped"

// eventComponent is the source of the Reconciler's events, and the client
// it asks the cloud-controller-manager for: the service controller's, on
// whose behalf it acts (controllers/service/controller.go, New).
const eventComponent = "service-controller"

// Initialize implements provider.Initializer, which provider.Cloud calls
// from the cloud-controller-manager's Initialize: it starts an event
// recorder, so that without Hooks.NodeSkipped a Node left out of the
// backends also gets a Warning event (reason LoadBalancerBackendSkipped)
// that `kubectl describe node` shows. The recorder's goroutines stop when
// ctx is done. A client the builder cannot make is logged and leaves the
// Reconciler logging only. Calls after the first do nothing.
func (r *Reconciler) Initialize(ctx context.Context, clientBuilder cloudprovider.ControllerClientBuilder) {
	if clientBuilder == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recorder != nil {
		return
	}
	client, err := clientBuilder.Client(eventComponent)
	if err != nil {
		klog.FromContext(ctx).Error(err, "No client for load-balancer events; Nodes left out of the backends are only logged")
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

// reportSkipped says, once, that node is left out for reason: through
// Hooks.NodeSkipped when set, else in the log and, after Initialize, as a
// Warning event on the Node.
func (r *Reconciler) reportSkipped(ctx context.Context, node *v1.Node, reason error) {
	if r.opts.Hooks.NodeSkipped != nil {
		r.opts.Hooks.NodeSkipped(ctx, node, reason)
		return
	}
	klog.FromContext(ctx).Info("Node left out of load-balancer backends", "node", klog.KObj(node), "providerID", cut(node.Spec.ProviderID), "reason", reason.Error())
	r.mu.Lock()
	rec := r.recorder
	r.mu.Unlock()
	if rec != nil {
		rec.Event(node, v1.EventTypeWarning, eventReasonBackendSkipped, fmt.Sprintf("Left out of load-balancer backends: %v", reason))
	}
}
