package loadbalancer_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// pooledCaps is every capability with shared backend pools.
var pooledCaps = func() loadbalancer.Capabilities {
	c := allCaps
	c.SharedBackendPools = true
	return c
}()

// newPooledReconciler returns a Reconciler with shared backend pools over
// a new poolMemDriver.
func newPooledReconciler(t *testing.T) (*loadbalancer.Reconciler, *poolMemDriver) {
	t.Helper()
	d := newPoolMemDriver()
	return newReconcilerOver(t, d, loadbalancer.Options{Capabilities: pooledCaps}), d
}

// services returns n LoadBalancer Services shop/web-<i> with UIDs of their
// own, each changed by mods.
func services(n int, mods ...func(*v1.Service)) []*v1.Service {
	out := make([]*v1.Service, n)
	for i := range out {
		out[i] = lbService(append([]func(*v1.Service){func(s *v1.Service) {
			s.Name = fmt.Sprintf("web-%d", i)
			s.UID = types.UID(fmt.Sprintf("uid-web-%d", i))
		}}, mods...)...)
	}
	return out
}

func local(s *v1.Service) {
	s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = 32100
}

// members returns the node names of p's members, sorted.
func members(p *loadbalancer.Pool) []string {
	var out []string
	for _, b := range p.Spec.Backends {
		out = append(out, b.NodeName)
	}
	slices.Sort(out)
	return out
}

// onlyPool returns the one pool of d, failing the test unless there is
// exactly one.
func onlyPool(t *testing.T, d *poolMemDriver) *loadbalancer.Pool {
	t.Helper()
	pools := d.storedPools()
	if len(pools) != 1 {
		t.Fatalf("the cloud has %d pools %v; want 1", len(pools), slices.Sorted(maps.Keys(pools)))
	}
	for _, p := range pools {
		return p
	}
	return nil
}

func TestSharedPoolNodeChangeIsOneWrite(t *testing.T) {
	const n = 5
	r, d := newPooledReconciler(t)
	svcs := services(n)
	for _, s := range svcs {
		mustEnsure(t, r, "c1", s, threeNodes()[:2])
	}
	wantCreate := append([]loadbalancer.ActionKind{}, slices.Repeat(kinds(loadbalancer.ActionCreate), n)...)
	if diff := cmp.Diff(wantCreate, d.takeApplied()); diff != "" {
		t.Errorf("bring-up load-balancer writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"CreatePool"}, d.takePoolWrites()); diff != "" {
		t.Errorf("bring-up pool writes (-want +got): one pool for every Service\n%s", diff)
	}
	pool := onlyPool(t, d)
	for id, lb := range d.stored() {
		if lb.Spec.BackendPool != pool.ID || len(lb.Spec.Backends) != 0 {
			t.Errorf("load balancer %s: pool %q, %d backends of its own; want pool %q and none", id, lb.Spec.BackendPool, len(lb.Spec.Backends), pool.ID)
		}
	}
	// A node joins: the service controller updates every Service, with
	// its workers running concurrently.
	var wg sync.WaitGroup
	for _, s := range svcs {
		wg.Go(func() {
			if err := r.UpdateLoadBalancer(t.Context(), "c1", s, threeNodes()); err != nil {
				t.Errorf("UpdateLoadBalancer %s: %v", s.Name, err)
			}
		})
	}
	wg.Wait()
	if diff := cmp.Diff([]string{"AddPoolBackends"}, d.takePoolWrites()); diff != "" {
		t.Errorf("a node joining %d Services (-want +got): exactly one pool write\n%s", n, diff)
	}
	if applied := d.takeApplied(); len(applied) != 0 {
		t.Errorf("a node joining: load-balancer writes %v; want none", applied)
	}
	if diff := cmp.Diff([]string{"n1", "n2", "n3"}, members(onlyPool(t, d))); diff != "" {
		t.Errorf("pool members (-want +got):\n%s", diff)
	}
	// Converged: Ensure and Update write nothing.
	mustEnsure(t, r, "c1", svcs[0], threeNodes())
	if err := r.UpdateLoadBalancer(t.Context(), "c1", svcs[1], threeNodes()); err != nil {
		t.Fatal(err)
	}
	if w, a := d.takePoolWrites(), d.takeApplied(); len(w)+len(a) != 0 {
		t.Errorf("converged Ensure and Update wrote %v %v; want nothing", w, a)
	}
}

func TestLocalServiceKeepsOwnBackends(t *testing.T) {
	r, d := newPooledReconciler(t)
	cluster, lcl := services(1)[0], services(2, local)[1]
	mustEnsure(t, r, "c1", cluster, threeNodes()[:2])
	mustEnsure(t, r, "c1", lcl, threeNodes()[:2])
	d.takeApplied()
	d.takePoolWrites()
	if err := r.UpdateLoadBalancer(t.Context(), "c1", lcl, threeNodes()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(kinds(loadbalancer.ActionAddBackends), d.takeApplied()); diff != "" {
		t.Errorf("externalTrafficPolicy Local: a node joining (-want +got): a write to its own backends\n%s", diff)
	}
	if w := d.takePoolWrites(); len(w) != 0 {
		t.Errorf("externalTrafficPolicy Local: pool writes %v; want none (its nodes are checked on its own port)", w)
	}
	for _, lb := range d.stored() {
		if lb.Tags[loadbalancer.TagServiceUID] == string(lcl.UID) && (lb.Spec.BackendPool != "" || len(lb.Spec.Backends) != 3) {
			t.Errorf("Local Service: pool %q, %d backends; want no pool and 3 backends", lb.Spec.BackendPool, len(lb.Spec.Backends))
		}
	}
	if diff := cmp.Diff([]string{"n1", "n2"}, members(onlyPool(t, d))); diff != "" {
		t.Errorf("the pool of the Cluster Service (-want +got): unchanged by the Local one\n%s", diff)
	}
}

func TestPoolDeletedWithItsLastUser(t *testing.T) {
	r, d := newPooledReconciler(t)
	ctx := t.Context()
	svcs := services(2)
	for _, s := range svcs {
		mustEnsure(t, r, "c1", s, threeNodes())
	}
	pool := onlyPool(t, d)
	d.takePoolWrites()
	if err := r.EnsureLoadBalancerDeleted(ctx, "c1", svcs[0]); err != nil {
		t.Fatalf("EnsureLoadBalancerDeleted of one of two users: %v; want nil (the pool in use is no failure)", err)
	}
	if got := onlyPool(t, d); got.ID != pool.ID || len(got.Spec.Backends) != 3 {
		t.Errorf("after deleting one of two users: pool %s with %d members; want %s kept with its 3", got.ID, len(got.Spec.Backends), pool.ID)
	}
	if err := r.EnsureLoadBalancerDeleted(ctx, "c1", svcs[1]); err != nil {
		t.Fatal(err)
	}
	if pools, lbs := d.storedPools(), d.stored(); len(pools)+len(lbs) != 0 {
		t.Errorf("after deleting the last user: pools %v, load balancers %v; want nothing left", pools, lbs)
	}
	if diff := cmp.Diff([]string{"DeletePool " + pool.ID, "DeletePool " + pool.ID}, d.takePoolWrites()); diff != "" {
		t.Errorf("pool deletes (-want +got): refused while in use, then done\n%s", diff)
	}
}

func TestPoolLeftByAFailedCreateIsCollected(t *testing.T) {
	r, d := newPooledReconciler(t)
	ctx := t.Context()
	svc := services(1)[0]
	d.onApply = func(a loadbalancer.Action) error {
		if a.Kind == loadbalancer.ActionCreate {
			return errors.New("quota exceeded")
		}
		return nil
	}
	if _, err := r.EnsureLoadBalancer(ctx, "c1", svc, threeNodes()); err == nil || !strings.Contains(err.Error(), "quota exceeded") {
		t.Fatalf("EnsureLoadBalancer = %v; want the driver's error", err)
	}
	onlyPool(t, d) // created before the load balancer, referenced by none
	// The user gives up: the Service goes, and so does the pool.
	if err := r.EnsureLoadBalancerDeleted(ctx, "c1", svc); err != nil {
		t.Fatal(err)
	}
	if pools := d.storedPools(); len(pools) != 0 {
		t.Errorf("after the Service is deleted: pools %v; want the unreferenced pool collected", pools)
	}
}

func TestLeavingThePoolReleasesIt(t *testing.T) {
	r, d := newPooledReconciler(t)
	svc := services(1)[0]
	mustEnsure(t, r, "c1", svc, threeNodes())
	pool := onlyPool(t, d)
	d.takeApplied()
	d.takePoolWrites()
	local(svc)
	mustEnsure(t, r, "c1", svc, threeNodes())
	if diff := cmp.Diff(kinds(loadbalancer.ActionUpdateHealthCheck, loadbalancer.ActionAddBackends, loadbalancer.ActionUpdateBackendPool), d.takeApplied()); diff != "" {
		t.Errorf("switching to externalTrafficPolicy Local (-want +got): own backends before the pool reference goes\n%s", diff)
	}
	if diff := cmp.Diff([]string{"DeletePool " + pool.ID}, d.takePoolWrites()); diff != "" {
		t.Errorf("pool writes (-want +got): the pool its last user left is deleted\n%s", diff)
	}
	if pools := d.storedPools(); len(pools) != 0 {
		t.Errorf("pools left: %v", pools)
	}
}

func TestOtherClustersPoolsNeverTouched(t *testing.T) {
	r, d := newPooledReconciler(t)
	other := newReconcilerOver(t, d, loadbalancer.Options{Capabilities: pooledCaps, ClusterID: "c2"})
	svc := services(1)[0]
	mustEnsure(t, other, "ignored", svc, threeNodes()[:1])
	mustEnsure(t, r, "c1", svc, threeNodes())
	pools := d.storedPools()
	if len(pools) != 2 {
		t.Fatalf("two clusters: %d pools; want one each", len(pools))
	}
	if err := r.EnsureLoadBalancerDeleted(t.Context(), "c1", svc); err != nil {
		t.Fatal(err)
	}
	left := onlyPool(t, d)
	if left.Tags[loadbalancer.TagCluster] != "c2" || len(left.Spec.Backends) != 1 {
		t.Errorf("after c1 deleted its Service: pool %v with %d members left; want c2's, untouched", left.Tags, len(left.Spec.Backends))
	}
}

func TestDuplicatePoolsLowestIDWins(t *testing.T) {
	r, d := newPooledReconciler(t)
	svcs := services(2)
	mustEnsure(t, r, "c1", svcs[0], threeNodes())
	first := onlyPool(t, d)
	// A second replica raced and created a pool of the same key.
	dup := first.Clone()
	dup.ID = "pool-0"
	d.mu.Lock()
	d.pools[dup.ID] = dup
	d.mu.Unlock()
	mustEnsure(t, r, "c1", svcs[0], threeNodes())
	mustEnsure(t, r, "c1", svcs[1], threeNodes())
	for _, lb := range d.stored() {
		if lb.Spec.BackendPool != "pool-0" {
			t.Errorf("load balancer %s references %q; want pool-0, the lowest ID, as every replica picks", lb.ID, lb.Spec.BackendPool)
		}
	}
	if _, ok := d.storedPools()[first.ID]; ok {
		t.Errorf("pool %s, no longer referenced, is left; want it released", first.ID)
	}
}

func TestSharedBackendPoolsNeedAPoolDriver(t *testing.T) {
	_, err := loadbalancer.NewReconciler(newMemDriver(), loadbalancer.Options{Capabilities: pooledCaps})
	if err == nil || !strings.Contains(err.Error(), "Options.Capabilities.SharedBackendPools") {
		t.Errorf("NewReconciler with SharedBackendPools over a Driver without pools: %v; want an error naming the field", err)
	}
}

// TestPoolMembersAreLiveInstances: under BackendKeyProviderID a Node whose
// instance is gone is left out of the pool, as out of a load balancer's
// own backends, whether the pool is created or gets new members.
func TestPoolMembersAreLiveInstances(t *testing.T) {
	good := []*v1.Node{node("n1", "10.0.0.1"), node("n2", "10.0.0.2")}
	book := &instanceBook{addrs: map[string][]v1.NodeAddress{}}
	for _, n := range good {
		book.addrs[n.Spec.ProviderID] = n.Status.Addresses
	}
	var log skipLog
	caps := withKey(loadbalancer.BackendKeyProviderID)
	caps.SharedBackendPools = true
	d := newPoolMemDriver()
	r := newReconcilerOver(t, d, loadbalancer.Options{Capabilities: caps, Instances: book, Hooks: loadbalancer.Hooks{NodeSkipped: log.hook}})
	svcs := services(2)
	mustEnsure(t, r, "c1", svcs[0], append(slices.Clone(good), node("ghost", "10.0.0.9")))
	if diff := cmp.Diff([]string{"n1", "n2"}, members(onlyPool(t, d))); diff != "" {
		t.Errorf("created pool's members (-want +got): the ghost's instance is gone\n%s", diff)
	}
	d.takePoolWrites()
	if err := r.UpdateLoadBalancer(t.Context(), "c1", svcs[0], append(slices.Clone(good), node("ghost2", "10.0.0.8"))); err != nil {
		t.Fatal(err)
	}
	if w := d.takePoolWrites(); len(w) != 0 {
		t.Errorf("a node without instance joining: pool writes %v; want none (nothing live to add)", w)
	}
	if diff := cmp.Diff([]string{"ghost", "ghost2"}, log.take()); diff != "" {
		t.Errorf("reported nodes (-want +got):\n%s", diff)
	}
}
