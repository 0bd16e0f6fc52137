package housekeeping

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The controllers' metrics, in the registry the CCM serves on /metrics.
// Their cloud calls are in ccmkit_cloud_requests_total with every other
// call of a ccmkit provider.
var (
	driftChecks = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "ccmkit",
		Subsystem:      "drift_repair",
		Name:           "services_total",
		Help:           "LoadBalancer Services checked by drift repair, by result: converged (no cloud write), repaired (cloud writes made), retry (throttled or still provisioning), error.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	driftWrites = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "ccmkit",
		Subsystem:      "drift_repair",
		Name:           "cloud_writes_total",
		Help:           "Cloud writes made by drift repair to put load balancers back as their Services want them.",
		StabilityLevel: metrics.ALPHA,
	})
	orphansSeen = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "ccmkit",
		Subsystem:      "orphan_collection",
		Name:           "load_balancers",
		Help:           "Load balancers tagged for this cluster whose Service UID does not exist, at the last pass, by state: waiting (within the grace period), held (a Service of the same namespace/name under a new UID not yet provisioned, or a Service naming it by stored ID), due (past the grace period; in dry-run mode they stay due).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"state"})
	orphansDeleted = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "ccmkit",
		Subsystem:      "orphan_collection",
		Name:           "deleted_total",
		Help:           "Orphaned load balancers deleted by orphan collection.",
		StabilityLevel: metrics.ALPHA,
	})

	registerMetrics sync.Once
)

// register registers the metrics the first time a controller is built, so
// that importing the package registers nothing.
func register() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(driftChecks, driftWrites, orphansSeen, orphansDeleted)
	})
}
