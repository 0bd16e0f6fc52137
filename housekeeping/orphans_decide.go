package housekeeping

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// orphanState is where an orphaned load balancer is on its way to
// deletion.
type orphanState int

const (
	// orphanWaiting: within the grace period since it was first seen.
	orphanWaiting orphanState = iota
	// orphanHeld: a Service of the same namespace/name exists under a new
	// UID and its own lifecycle has not run yet (see settled), or a
	// Service names it by stored ID.
	orphanHeld
	// orphanDue: past the grace period, nothing holds it: delete.
	orphanDue
)

var orphanStateNames = map[orphanState]string{orphanWaiting: "waiting", orphanHeld: "held", orphanDue: "due"}

// orphan is one load balancer whose Service UID does not exist.
type orphan struct {
	lb    *loadbalancer.LoadBalancer
	owner loadbalancer.Owner
	since time.Time // first seen orphaned
	state orphanState
	// successor is the Service of the same namespace/name under a new UID,
	// if any.
	successor *v1.Service
	// claimant is a Service that names the load balancer by stored ID, if
	// any.
	claimant *v1.Service
}

// orphansInput is the input of findOrphans.
type orphansInput struct {
	// owned are the load balancers tagged for the cluster (ListOwned,
	// which knows the cluster identity: the provider's ClusterID or the
	// --cluster-name).
	owned []*loadbalancer.LoadBalancer
	// services are every Service of the cluster (a synced informer's).
	services []*v1.Service
	// claims are the load balancers Services name by stored ID: ID →
	// Service (Owners.StoredID).
	claims map[string]*v1.Service
	// seen is when each load balancer ID was first seen orphaned; it is
	// not modified.
	seen map[string]time.Time
	now  time.Time
	// grace is how long an orphan waits before it is due; negative means
	// none.
	grace time.Duration
}

// findOrphans decides, from values only, which of the owned load
// balancers are orphans and where each is: a load balancer is an orphan
// when it carries a Service UID tag and no Service of the cluster has that
// UID. A load balancer without the UID tag (another tool's, or one a user
// tagged by hand) is never an orphan; one of another cluster is not in
// owned. An orphan a Service claims by stored ID is held as long as the
// claim stands, whatever the grace period. The result is in the order of owned; the second result
// is the new seen: the orphans' first-seen times (a load balancer no
// longer orphaned is forgotten, so it starts a new grace period if it
// is orphaned again).
func findOrphans(in orphansInput) ([]orphan, map[string]time.Time) {
	uids := make(map[types.UID]bool, len(in.services))
	byName := make(map[string]*v1.Service, len(in.services))
	for _, s := range in.services {
		uids[s.UID] = true
		byName[s.Namespace+"/"+s.Name] = s
	}
	var out []orphan
	seen := map[string]time.Time{}
	for _, lb := range in.owned {
		owner, tagged := loadbalancer.OwnerFromTags(lb.Tags)
		if !tagged || owner.UID == "" || uids[owner.UID] {
			continue
		}
		o := orphan{lb: lb, owner: owner, since: in.now}
		if t, ok := in.seen[lb.ID]; ok {
			o.since = t
		}
		seen[lb.ID] = o.since
		if owner.Name != "" {
			o.successor = byName[owner.Namespace+"/"+owner.Name]
		}
		o.claimant = in.claims[lb.ID]
		switch {
		case o.claimant != nil:
			o.state = orphanHeld
		case o.successor != nil && !settled(o.successor):
			o.state = orphanHeld
		case in.grace >= 0 && in.now.Sub(o.since) < in.grace:
			o.state = orphanWaiting
		default:
			o.state = orphanDue
		}
		out = append(out, o)
	}
	return out, seen
}

// settled reports whether the service controller is done with svc, a
// Service that took the name of an orphan's Service under a new UID: its
// first EnsureLoadBalancer has succeeded (provisioned), or it wants no
// load balancer from this CCM and has no cleanup pending (no finalizer).
// Until then the orphan is held: the new Service's lifecycle decides
// first what becomes of the name (a provider may adopt by stored ID).
func settled(svc *v1.Service) bool {
	if svc.DeletionTimestamp != nil {
		return false
	}
	if wantsLoadBalancer(svc) {
		return provisioned(svc)
	}
	return !servicehelper.HasLBFinalizer(svc)
}
