package cloudmetrics

import "k8s.io/component-base/metrics"

// CoalesceResult is what became of one backend change of a load balancer
// whose Reconciler coalesces node-sync writes.
type CoalesceResult string

// The results counted by ccmkit_loadbalancer_coalesced_updates_total.
const (
	// CoalesceDeferred is an UpdateLoadBalancer call whose change was kept
	// for the end of its window.
	CoalesceDeferred CoalesceResult = "deferred"
	// CoalesceWritten is a window's write that succeeded (or found no
	// load balancer to update): one for any number of deferred calls.
	CoalesceWritten CoalesceResult = "written"
	// CoalesceFailed is a window's write that failed and is retried.
	CoalesceFailed CoalesceResult = "failed"
	// CoalesceSuperseded is a pending change dropped because
	// EnsureLoadBalancer wrote the whole load balancer after it arrived,
	// or EnsureLoadBalancerDeleted removed it.
	CoalesceSuperseded CoalesceResult = "superseded"
)

var coalesced = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace:      "ccmkit",
	Subsystem:      "loadbalancer",
	Name:           "coalesced_updates_total",
	Help:           "Backend changes of load balancers under a coalescing window, by result (deferred, written, failed, superseded).",
	StabilityLevel: metrics.ALPHA,
}, []string{"result"})

// Coalesced records one backend change's result r.
func Coalesced(r CoalesceResult) {
	registerOnce()
	coalesced.WithLabelValues(string(r)).Inc()
}
