// Package housekeeping holds two controllers that a CCM main runs next to
// the upstream ones (k8s.io/cloud-provider/app) to keep a provider's load
// balancers in order where the upstream service controller does not look:
//
//   - DriftRepair re-ensures every LoadBalancer Service on a period, so that
//     a listener deleted in the cloud console, a backend dropped by hand or
//     a setting changed behind the CCM's back is put back by the next
//     pass, not when the Service is next edited. With a
//     loadbalancer.Reconciler over a loadbalancer.Cache a converged
//     cluster costs one load-balancer List per pass (the Reconciler makes
//     no write when the cloud matches), and its calls are admitted by the
//     governor at background priority. It never undoes the service
//     controller's newer work: a call whose Service or Nodes changed since
//     it read them changes nothing (loadbalancer.ErrStale).
//   - OrphanCollector lists the load balancers tagged for this cluster and
//     deletes, after a grace period, those whose Service UID no longer
//     exists: a Service whose finalizer was removed by force, one deleted
//     while the CCM was down before it had its finalizer. It never touches
//     a load balancer of another cluster, one without ccmkit's ownership
//     tags, one a Service names by stored ID, or one whose Service exists
//     under a new UID until that Service's own lifecycle has run. A
//     dry-run mode only reports.
//
// Both are registered in the example main's controller map under
// DriftRepairName and OrphanCollectionName (so --controllers can turn each
// off), through NewDriftRepairController and NewOrphanCollectionController;
// their periods and the grace period are flags of that main.
//
// The cluster identity must be unique among the clusters that share a
// cloud account: it is the provider's cluster ID (loadbalancer.Options
// ClusterID), else --cluster-name. Orphan collection does not start on a
// cloud without a cluster ID (cloudprovider.Interface HasClusterID), where
// two clusters with the default --cluster-name would collect each other's
// load balancers.
//
// What this package is not for: the upstream controllers' own work
// (creating, updating and deleting the load balancers of live Services is
// the service controller's), and providers not built on
// loadbalancer.Reconciler: DriftRepair needs a Repairer, OrphanCollector
// an Owners, and the Reconciler is both.
package housekeeping
