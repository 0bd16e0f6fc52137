package loadbalancer

import (
	"cmp"
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/provider"
)

// The defaults of Options (CONTRIBUTING.md A5: stated in the field docs,
// not exported).
const (
	defaultRetryAfter      = 10 * time.Second
	defaultMaxThrottleWait = time.Minute
	defaultMaxBusyWait     = 2 * time.Second
)

// Options configures a Reconciler. Every field is optional: the zero value
// of each is a documented default.
type Options struct {
	// ClusterID, if set, is the cluster identity used for ownership and
	// naming instead of the clusterName argument of each call (the CCM's
	// --cluster-name). See the package doc.
	ClusterID string
	// Naming configures load-balancer names. The zero value is the
	// default: see NamerOptions.
	Naming NamerOptions
	// Capabilities are what the provider's load balancers support. The
	// zero value is single-stack TCP only, see Capabilities.
	Capabilities Capabilities
	// Annotations are the provider's declared annotations. nil means none.
	Annotations *annotation.Set
	// RequestedIPAnnotation, if set, is a declared annotation.KindIP
	// annotation requesting an address (see
	// DesiredInput.RequestedIPAnnotation). It must come from Annotations.
	RequestedIPAnnotation *annotation.Annotation
	// AppProtocolAnnotation, if set, is a declared per-port annotation
	// (annotation.Annotation.PerPort, of kind enum or string) giving a
	// port's application protocol (see
	// DesiredInput.AppProtocolAnnotation). It must come from Annotations,
	// and Capabilities.AppProtocols must not be empty.
	AppProtocolAnnotation *annotation.Annotation
	// HealthCheckAnnotation, if set, is a declared per-port string
	// annotation giving a port's listener pool a health check of its own,
	// "tcp" or "http:/path" on the port's node port (see
	// DesiredInput.HealthCheckAnnotation; Capabilities.ListenerPools only,
	// else a Service that sets it is refused). It must come from
	// Annotations.
	HealthCheckAnnotation *annotation.Annotation
	// IDAnnotation, if set, is a declared annotation.KindString annotation
	// holding a stored cloud load-balancer ID: the first step of the
	// lookup order and the way to adopt an existing load balancer (see the
	// package doc). It must come from Annotations.
	IDAnnotation *annotation.Annotation
	// RetryAfter is how long the service controller waits before calling
	// EnsureLoadBalancer again when the load balancer has no address yet
	// (an api.RetryError). 0 means 10s; negative is an error.
	RetryAfter time.Duration
	// MaxThrottleWait bounds how long GetLoadBalancer, UpdateLoadBalancer
	// and EnsureLoadBalancerDeleted wait, in all, for the delays of
	// throttled cloud calls (see Driver) before they call again: the
	// service controller honours an api.RetryError only from
	// EnsureLoadBalancer and retries the others after a back-off of its
	// own, the same for every Service (controllers/service/controller.go:
	// processServiceDeletion, nodeSyncService), so failing fast would bring
	// every throttled Service back at once. EnsureLoadBalancer never waits:
	// it returns its RetryError. 0 means 1m; negative means never wait.
	MaxThrottleWait time.Duration
	// MaxBusyWait bounds how long one call of EnsureLoadBalancer,
	// UpdateLoadBalancer or EnsureLoadBalancerDeleted waits, in all, for
	// a busy cloud (a *BusyError, see Driver) before its next write. A
	// call whose next wait would not fit stops, keeping what it wrote:
	// EnsureLoadBalancer returns a RetryError of exactly the cloud's delay,
	// the others the busy error (see each method). The wait holds one of
	// the service controller's workers, and by default it has one
	// (--concurrent-service-syncs, 1 in k8s.io/cloud-provider@v0.37.2
	// controllers/service/config/v1alpha1/defaults.go,
	// RecommendedDefaultServiceControllerConfiguration): while one Service
	// waits, every other Service waits too. The default lets a call ride
	// out one or two busy answers of a second or so (OpenStack Octavia's
	// PENDING_UPDATE) and hands the worker back after that, where a
	// requeue after the exact delay costs one look-up. 0 means 2s;
	// negative means never wait.
	MaxBusyWait time.Duration
	// CoalesceWindow, when positive, makes UpdateLoadBalancer write
	// behind: it checks its arguments, keeps the Service's new node set and
	// returns, and the Reconciler writes the latest set it was given for
	// that Service once, CoalesceWindow after the first call it has not
	// written yet. The service controller calls UpdateLoadBalancer for
	// every LoadBalancer Service in each node-sync round, and runs a round
	// for each Node change it sees (controllers/service/controller.go,
	// nodeSyncLoop and updateLoadBalancerHosts): while Nodes join, a cloud
	// whose load balancers keep their own backends (no
	// Capabilities.SharedBackendPools) takes one write per load balancer
	// per round, a shared pool one per round; coalesced, one per window.
	// A Node deleted within a window is never written.
	//
	// A write that fails is not lost: it is retried after the window
	// doubled for each consecutive failure (at least a throttled cloud's
	// delay, at most 5 minutes), with the latest set if a newer call came;
	// it is counted (ccmkit_loadbalancer_coalesced_updates_total, see the
	// package doc, "Metrics"), recorded on the Service as a Warning event
	// of reason UpdateLoadBalancerFailed (the service controller's own for
	// a failed UpdateLoadBalancer, lockedUpdateLoadBalancerHosts), and
	// returned, wrapped, by the Service's next UpdateLoadBalancer until a
	// write succeeds: the service controller then records its event and
	// calls again in its next round (nodeSyncService's servicesToRetry).
	// An EnsureLoadBalancer that converges the load balancer supersedes
	// the changes that arrived before it was called; an
	// EnsureLoadBalancerDeleted drops them. Changes still pending when the
	// context given to Initialize ends are dropped: the next leader
	// ensures every Service with the Nodes of that moment (the service
	// controller syncs each Service when it starts). Flush writes them at
	// once. The Service and Nodes of a deferred call are kept, unmodified,
	// until written: a caller must not modify them afterwards (the service
	// controller's come from its informers, which it never modifies).
	//
	// 0 (the default) writes in the call, as before; negative is an
	// error. RecommendedCoalesceWindow is the measured choice.
	CoalesceWindow time.Duration
	// Clock is the clock the waits for throttled cloud calls and for a
	// busy cloud run on (MaxThrottleWait, MaxBusyWait), and the coalescing
	// windows (CoalesceWindow). Nil means the real clock; tests pass a
	// k8s.io/utils/clock/testing.FakeClock and step it.
	Clock clock.Clock
	// Hooks are optional callbacks for events and logs.
	Hooks Hooks
	// Instances, if set, supplies the addresses of a Node that has a
	// spec.providerID but no InternalIP yet (through InstanceMetadata). The
	// cloud-node controller sets spec.providerID before it patches the
	// Node's addresses, and the service controller syncs backends on the
	// provider-ID change but never on an address change
	// (controllers/service/controller.go, shouldSyncUpdatedNode): without
	// Instances such a node is left out of the load balancer until some
	// other node changes. Pass the provider's InstancesV2 (the instances
	// package's Adapter, ideally over its Cache: one List serves every
	// node). nil means such nodes are left out (see BackendKey).
	//
	// With Instances set, the Reconciler also checks, under every
	// BackendKey, that the instance of each backend it is about to add
	// (ActionCreate's, ActionAddBackends', ActionAddListenerPool's and a
	// shared pool's) still
	// exists (InstanceExists, by the Node's spec.providerID, which every
	// desired backend carries): a Node whose instance is gone is left out
	// and reported once (Hooks.NodeSkipped). Its Node object lingers, with
	// its last addresses, until the cloud-node-lifecycle controller sees it
	// NotReady and deletes it (k8s.io/cloud-provider@v0.37.2
	// controllers/nodelifecycle/node_lifecycle_controller.go,
	// MonitorNodes): a cloud keyed by instance refuses the unknown target, failing the
	// whole action and so every other new backend, and one keyed by
	// address or Node name would send traffic to an address that no longer
	// answers, or that another machine now holds. Backends already in the
	// load balancer are not checked, so a converged load balancer costs no
	// look-up; with an instances.Cache a check is no cloud call.
	Instances cloudprovider.InstancesV2
	// Codec, when its Scheme is set, checks every Node's spec.providerID:
	// a Node whose provider ID it rejects (another provider's scheme, or
	// malformed) cannot be a target of this cloud and is left out of the
	// backends, reported once through Hooks.NodeSkipped; the other Nodes
	// are served. Set it to the Codec the provider's instances use; with
	// Capabilities.BackendKey = BackendKeyProviderID it is what keeps a
	// foreign Node from failing every Driver.Apply. The zero value checks
	// nothing.
	Codec provider.Codec
}

// withDefaults fills in the zero fields of o (CONTRIBUTING.md A3).
func (o Options) withDefaults() Options {
	o.RetryAfter = cmp.Or(o.RetryAfter, defaultRetryAfter)
	o.MaxThrottleWait = cmp.Or(o.MaxThrottleWait, defaultMaxThrottleWait)
	o.MaxBusyWait = cmp.Or(o.MaxBusyWait, defaultMaxBusyWait)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Hooks are optional callbacks. They are called synchronously on the
// goroutine of the LoadBalancer method, while the Service's lock is held;
// they must not call the Reconciler for the same Service, and must treat
// svc as read-only. Nil hooks are skipped.
type Hooks struct {
	// UserError is called when a method fails because of something the
	// user can fix on the Service or in the cloud: a malformed annotation
	// (annotation.ErrInvalid), an invalid field (ErrInvalidService), an
	// unsupported feature (ErrUnsupported), a load balancer owned by
	// someone else (ErrNotOwned) or a stored ID that does not exist
	// (ErrNotFound from EnsureLoadBalancer). op is the method name, e.g.
	// "EnsureLoadBalancer"; err is the error before the method wraps it
	// with op and the Service. Nil: once Initialize has run, the
	// Reconciler records a Warning event on svc with a reason per class
	// (see the package doc, "Events"); set it to replace that event.
	UserError func(ctx context.Context, op string, svc *v1.Service, err error)
	// Action is called after each Driver.Apply, with its error (nil on
	// success), e.g. to record events or metrics. A *BusyError not wrapping
	// ErrRefused means the action was applied and the cloud is busy (see
	// Driver); an answer without a load balancer that the Reconciler
	// cannot derive (a creation's, see Driver.Apply) is an error.
	Action func(ctx context.Context, svc *v1.Service, a Action, err error)
	// NodeSkipped is called when a Node the service controller passed is
	// left out of the backends because of something wrong with the Node
	// itself, never a transient cloud error: its spec.providerID is
	// another provider's or malformed (see Options.Codec), or it has no
	// InternalIP and Options.Instances reports its instance gone or its
	// provider ID invalid. The other Nodes are served and the call does not
	// fail. It is called once per Node name, provider ID and reason for the
	// Reconciler's lifetime (again only when one of them changes), from
	// whichever call saw it first. Nil: the Reconciler logs it once, at
	// level 0, and, once Initialize has run, records a Warning event
	// (reason LoadBalancerBackendSkipped) on the Node and one on the
	// Service of that call (see the package doc, "Events").
	NodeSkipped func(ctx context.Context, node *v1.Node, reason error)
}
