// Package housekeeping holds two controllers that a CCM main runs next to
// the upstream ones (k8s.io/cloud-provider/app) to keep a provider's load
// balancers in order where the upstream service controller does not look:
//
//   - DriftRepair re-ensures every LoadBalancer Service on a period, so that
//     a listener deleted in the cloud console, a backend dropped by hand or
//     a setting changed behind the CCM's back is put back within one
//     period, not when the Service is next edited. With a ccmkit provider a
//     converged cluster costs one load-balancer List per period (the
//     Reconciler's Ensure makes no write when the cloud matches), and its
//     calls are admitted by the governor at background priority.
//   - OrphanCollector lists the load balancers tagged for this cluster and
//     deletes, after a grace period, those whose Service UID no longer
//     exists: a Service whose finalizer was removed by force, one deleted
//     while the CCM was down before it had its finalizer. It never touches
//     a load balancer of another cluster, one without ccmkit's ownership
//     tags, or one whose Service exists under a new UID until that
//     Service's own lifecycle has run. A dry-run mode only reports.
//
// Both are registered in the example main's controller map under
// DriftRepairName and OrphanCollectionName (so --controllers can turn each
// off), through DriftRepairInitFunc and OrphanCollectionInitFunc; their
// periods and the grace period are flags of that main.
//
// What this package is not for: the upstream controllers' own work
// (creating, updating and deleting the load balancers of live Services is
// the service controller's), and clouds whose load balancers do not carry
// ccmkit's ownership tags: OrphanCollector needs a provider whose
// LoadBalancer can list what the cluster owns (Owners, which
// loadbalancer.Reconciler implements). DriftRepair works with any
// cloudprovider.LoadBalancer whose EnsureLoadBalancer is idempotent.
package housekeeping
