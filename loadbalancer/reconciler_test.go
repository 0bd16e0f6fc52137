package loadbalancer_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/internal/listcache"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// newReconciler returns a Reconciler over a new memDriver, with every
// capability unless opts declares some.
func newReconciler(t *testing.T, opts loadbalancer.Options) (*loadbalancer.Reconciler, *memDriver) {
	t.Helper()
	d := newMemDriver()
	return newReconcilerOver(t, d, opts), d
}

// newReconcilerOver is newReconciler over d.
func newReconcilerOver(t *testing.T, d loadbalancer.Driver, opts loadbalancer.Options) *loadbalancer.Reconciler {
	t.Helper()
	if reflect.DeepEqual(opts.Capabilities, loadbalancer.Capabilities{}) {
		opts.Capabilities = allCaps
	}
	r, err := loadbalancer.NewReconciler(d, opts)
	if err != nil {
		t.Fatalf("NewReconciler: %v", err)
	}
	return r
}

func threeNodes() []*v1.Node {
	return []*v1.Node{node("n1", "10.0.0.1"), node("n2", "10.0.0.2"), node("n3", "10.0.0.3")}
}

func mustEnsure(t *testing.T, r *loadbalancer.Reconciler, cluster string, svc *v1.Service, nodes []*v1.Node) *v1.LoadBalancerStatus {
	t.Helper()
	st, err := r.EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	return st
}

func kinds(ks ...loadbalancer.ActionKind) []loadbalancer.ActionKind { return ks }

func TestEnsureWrites(t *testing.T) {
	cases := []struct {
		name, reason string
		svc2         *v1.Service
		nodes2       []*v1.Node
		want         []loadbalancer.ActionKind
	}{
		{"converged", "a converged Ensure makes no write", lbService(), threeNodes(), nil},
		{"node added", "one more node is exactly one backend write",
			lbService(), append(threeNodes(), node("n4", "10.0.0.4")), kinds(loadbalancer.ActionAddBackends)},
		{"node removed", "one node less is exactly one backend write",
			lbService(), threeNodes()[:2], kinds(loadbalancer.ActionRemoveBackends)},
		{"port changed", "a Service port change is one listener write",
			lbService(func(s *v1.Service) { s.Spec.Ports[0].Port = 8080 }), threeNodes(), kinds(loadbalancer.ActionUpdateListener)},
		{"node port changed", "a node port change is one listener write",
			lbService(func(s *v1.Service) { s.Spec.Ports[0].NodePort = 31000 }), threeNodes(), kinds(loadbalancer.ActionUpdateListener)},
		{"source ranges changed", "one source-range write",
			lbService(func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} }), threeNodes(), kinds(loadbalancer.ActionUpdateSourceRanges)},
		{"traffic policy Local", "one health-check write",
			lbService(func(s *v1.Service) {
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 32100
			}), threeNodes(), kinds(loadbalancer.ActionUpdateHealthCheck)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, d := newReconciler(t, loadbalancer.Options{})
			st1 := mustEnsure(t, r, "c1", lbService(), threeNodes())
			if applied, _ := d.writes(); !slices.Equal(applied, kinds(loadbalancer.ActionCreate)) {
				t.Fatalf("first Ensure wrote %v; want one create", applied)
			}
			st2 := mustEnsure(t, r, "c1", tc.svc2, tc.nodes2)
			applied, deleted := d.writes()
			if diff := cmp.Diff(tc.want, applied); diff != "" || len(deleted) > 0 {
				t.Errorf("%s: writes (-want +got):\n%s deleted: %v", tc.reason, diff, deleted)
			}
			if diff := cmp.Diff(st1, st2); diff != "" {
				t.Errorf("%s: status changed (-first +second):\n%s", tc.reason, diff)
			}
			if again := mustEnsure(t, r, "c1", tc.svc2, tc.nodes2); again == nil {
				t.Fatal("nil status")
			}
			if applied, _ := d.writes(); len(applied) != 0 {
				t.Errorf("%s: Ensure after converging wrote %v; want nothing", tc.reason, applied)
			}
		})
	}
}

func TestUpdateChangesBackendsOnly(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{})
	mustEnsure(t, r, "c1", lbService(), threeNodes())
	d.writes()
	before := d.stored()
	// The Service changed too, but Update must only touch backends.
	svc := lbService(func(s *v1.Service) { s.Spec.Ports[0].Port = 8080; s.Spec.SessionAffinity = v1.ServiceAffinityClientIP })
	nodes := append(threeNodes()[1:], node("n4", "10.0.0.4"))
	if err := r.UpdateLoadBalancer(t.Context(), "c1", svc, nodes); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	applied, _ := d.writes()
	if diff := cmp.Diff(kinds(loadbalancer.ActionAddBackends, loadbalancer.ActionRemoveBackends), applied); diff != "" {
		t.Errorf("Update writes (-want +got):\n%s", diff)
	}
	after := d.stored()
	for id, lb := range after {
		old := before[id]
		wantSpec := old.Clone().Spec
		wantSpec.Backends = []loadbalancer.Backend{
			{NodeName: "n2", ProviderID: "test://n2", IPv4: addr("10.0.0.2")},
			{NodeName: "n3", ProviderID: "test://n3", IPv4: addr("10.0.0.3")},
			{NodeName: "n4", ProviderID: "test://n4", IPv4: addr("10.0.0.4")},
		}
		if diff := cmp.Diff(wantSpec, lb.Spec, cmpOpts); diff != "" {
			t.Errorf("after Update (-want +got):\n%s", diff)
		}
	}
	if err := r.UpdateLoadBalancer(t.Context(), "c1", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if applied, _ := d.writes(); len(applied) != 0 {
		t.Errorf("a converged Update wrote %v", applied)
	}
}

func TestUpdateWithoutLoadBalancer(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{})
	err := r.UpdateLoadBalancer(t.Context(), "c1", lbService(), threeNodes())
	if !errors.Is(err, loadbalancer.ErrNotFound) {
		t.Errorf("Update without a load balancer: %v; want ErrNotFound", err)
	}
	if applied, _ := d.writes(); len(applied) != 0 {
		t.Errorf("wrote %v", applied)
	}
}

func TestDelete(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{})
	ctx := t.Context()
	if err := r.EnsureLoadBalancerDeleted(ctx, "c1", lbService()); err != nil {
		t.Fatalf("Delete of an unknown load balancer: %v; want nil", err)
	}
	mustEnsure(t, r, "c1", lbService(), threeNodes())
	// The controller may hold a stale Service: type ClusterIP, node ports 0.
	stale := lbService(func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeClusterIP
		s.Spec.Ports[0].NodePort = 0
	})
	for i := range 2 {
		if err := r.EnsureLoadBalancerDeleted(ctx, "c1", stale); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	if got := d.stored(); len(got) != 0 {
		t.Errorf("after Delete the cloud still has %v", got)
	}
	if _, exists, err := r.GetLoadBalancer(ctx, "c1", stale); exists || err != nil {
		t.Errorf("Get after Delete = %v, %v; want false, nil", exists, err)
	}
	// Ensure after Delete recreates.
	mustEnsure(t, r, "c1", lbService(), threeNodes())
	if got := d.stored(); len(got) != 1 {
		t.Errorf("Ensure after Delete: %d load balancers; want 1", len(got))
	}
}

func TestGetExistsWhileAnyPartRemains(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{})
	ctx := t.Context()
	st := mustEnsure(t, r, "c1", lbService(), threeNodes())
	got, exists, err := r.GetLoadBalancer(ctx, "c1", lbService())
	if err != nil || !exists || !cmp.Equal(st, got) {
		t.Fatalf("Get = %v, %v, %v; want %v, true, nil", got, exists, err, st)
	}
	// A delete that fails half-way leaves the load balancer findable.
	d.onDelete = func(*loadbalancer.LoadBalancer) error { return errors.New("firewall still in use") }
	if err := r.EnsureLoadBalancerDeleted(ctx, "c1", lbService()); err == nil || !strings.Contains(err.Error(), "firewall still in use") {
		t.Fatalf("Delete = %v; want the driver's error", err)
	}
	if _, exists, _ := r.GetLoadBalancer(ctx, "c1", lbService()); !exists {
		t.Errorf("Get after a failed delete: exists=false; want true while anything remains")
	}
	d.onDelete = nil
	if err := r.EnsureLoadBalancerDeleted(ctx, "c1", lbService()); err != nil {
		t.Fatal(err)
	}
	if _, exists, _ := r.GetLoadBalancer(ctx, "c1", lbService()); exists {
		t.Errorf("Get after delete: exists=true")
	}
}

func TestOtherClusterNeverTouched(t *testing.T) {
	d := newMemDriver()
	rA := newReconcilerOver(t, d, loadbalancer.Options{})
	rB := newReconcilerOver(t, d, loadbalancer.Options{})
	ctx := t.Context()
	// Same namespace/name, and even the same UID (a cloned cluster).
	mustEnsure(t, rA, "cluster-a", lbService(), threeNodes())
	snapshot := d.stored()
	d.writes()

	svcB := lbService()
	if _, exists, _ := rB.GetLoadBalancer(ctx, "cluster-b", svcB); exists {
		t.Errorf("cluster B sees cluster A's load balancer")
	}
	if err := rB.UpdateLoadBalancer(ctx, "cluster-b", svcB, threeNodes()[:1]); !errors.Is(err, loadbalancer.ErrNotFound) {
		t.Errorf("cluster B Update: %v; want ErrNotFound", err)
	}
	if err := rB.EnsureLoadBalancerDeleted(ctx, "cluster-b", svcB); err != nil {
		t.Errorf("cluster B Delete: %v", err)
	}
	mustEnsure(t, rB, "cluster-b", svcB, threeNodes()[:1])
	if err := rB.EnsureLoadBalancerDeleted(ctx, "cluster-b", svcB); err != nil {
		t.Errorf("cluster B Delete: %v", err)
	}
	applied, deleted := d.writes()
	if len(applied) != 1 || len(deleted) != 1 {
		t.Errorf("cluster B wrote %v and deleted %v; want its own create and delete only", applied, deleted)
	}
	if diff := cmp.Diff(snapshot, d.stored(), cmpOpts); diff != "" {
		t.Errorf("cluster A's load balancer changed (-before +after):\n%s", diff)
	}
}

func TestNameConflictIsNotAdopted(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{})
	ctx := t.Context()
	// Someone created a load balancer under our name, without our tags.
	name := r.GetLoadBalancerName(ctx, "c1", lbService())
	squatter := &loadbalancer.LoadBalancer{ID: "lb-x", Name: name, Tags: map[string]string{"team": "x"}}
	d.lbs["lb-x"] = squatter
	_, err := r.EnsureLoadBalancer(ctx, "c1", lbService(), threeNodes())
	var oe *loadbalancer.OwnershipError
	if !errors.As(err, &oe) || oe.How != "name" || oe.ID != "lb-x" {
		t.Errorf("Ensure over a squatted name: %v; want an *OwnershipError found by name", err)
	}
	if _, exists, err := r.GetLoadBalancer(ctx, "c1", lbService()); exists || err != nil {
		t.Errorf("Get = %v, %v; want false, nil: a name alone is not ownership", exists, err)
	}
	if err := r.EnsureLoadBalancerDeleted(ctx, "c1", lbService()); err != nil {
		t.Errorf("Delete = %v", err)
	}
	if applied, deleted := d.writes(); len(applied)+len(deleted) != 0 {
		t.Errorf("wrote %v, deleted %v; want nothing", applied, deleted)
	}
	if _, ok := d.stored()["lb-x"]; !ok {
		t.Errorf("the squatter was deleted")
	}
}

func TestNameFindsOwnedWhenTagSearchMisses(t *testing.T) {
	// A cloud whose tag search is eventually consistent: Find by tags sees
	// nothing, Find by name sees the load balancer.
	base := newMemDriver()
	d := &noTagSearch{base}
	r := newReconcilerOver(t, d, loadbalancer.Options{})
	mustEnsure(t, r, "c1", lbService(), threeNodes())
	base.writes()
	mustEnsure(t, r, "c1", lbService(), threeNodes())
	if applied, _ := base.writes(); len(applied) != 0 {
		t.Errorf("second Ensure wrote %v; want nothing (found by name with ownership check)", applied)
	}
	if len(base.stored()) != 1 {
		t.Errorf("%d load balancers; want 1", len(base.stored()))
	}
}

type noTagSearch struct{ *memDriver }

func (d *noTagSearch) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	if len(q.Tags) > 0 {
		return nil, nil
	}
	return d.memDriver.Find(ctx, q)
}

func TestMalformedAnnotationChangesNothing(t *testing.T) {
	set, _ := testAnnotations(t)
	var hooked []error
	r, d := newReconciler(t, loadbalancer.Options{Annotations: set, Hooks: loadbalancer.Hooks{
		UserError: func(_ context.Context, op string, svc *v1.Service, err error) {
			hooked = append(hooked, fmt.Errorf("%s %s/%s: %w", op, svc.Namespace, svc.Name, err))
		},
	}})
	mustEnsure(t, r, "c1", lbService(), threeNodes())
	d.writes()
	before := d.stored()
	bad := lbService(func(s *v1.Service) {
		s.Annotations = map[string]string{"lb.example.com/algorithm": "fastest"}
		s.Spec.Ports[0].Port = 8080 // a valid change that must not be applied either
	})
	_, err := r.EnsureLoadBalancer(t.Context(), "c1", bad, append(threeNodes(), node("n4", "10.0.0.4")))
	if !errors.Is(err, annotation.ErrInvalid) || !strings.Contains(err.Error(), `annotation "lb.example.com/algorithm": invalid value "fastest": expected one of "round-robin", "least-connections"`) {
		t.Errorf("Ensure with a malformed annotation: %v; want an error naming it, the value and the expectation", err)
	}
	if applied, deleted := d.writes(); len(applied)+len(deleted) != 0 {
		t.Errorf("wrote %v, deleted %v; want nothing", applied, deleted)
	}
	if diff := cmp.Diff(before, d.stored(), cmpOpts); diff != "" {
		t.Errorf("the cloud changed (-before +after):\n%s", diff)
	}
	if len(hooked) != 1 || !errors.Is(hooked[0], annotation.ErrInvalid) || !strings.HasPrefix(hooked[0].Error(), "EnsureLoadBalancer shop/web") {
		t.Errorf("UserError hook calls: %v; want one for the annotation", hooked)
	}
}

func TestImplementedElsewhere(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{})
	svc := lbService(func(s *v1.Service) { s.Spec.LoadBalancerClass = ptr("example.com/other") })
	if _, err := r.EnsureLoadBalancer(t.Context(), "c1", svc, threeNodes()); err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // the service controller compares ImplementedElsewhere with ==: it must come back unwrapped
		t.Errorf("Ensure = %v; want ImplementedElsewhere unwrapped", err)
	}
	if err := r.UpdateLoadBalancer(t.Context(), "c1", svc, threeNodes()); err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // the service controller compares ImplementedElsewhere with ==: it must come back unwrapped
		t.Errorf("Update = %v; want ImplementedElsewhere unwrapped", err)
	}
	if _, exists, err := r.GetLoadBalancer(t.Context(), "c1", svc); exists || err != nil {
		t.Errorf("Get = %v, %v; want false, nil", exists, err)
	}
	if err := r.EnsureLoadBalancerDeleted(t.Context(), "c1", svc); err != nil {
		t.Errorf("Delete = %v; want nil", err)
	}
	if applied, deleted := d.writes(); len(applied)+len(deleted) != 0 {
		t.Errorf("wrote %v, deleted %v; want nothing", applied, deleted)
	}
}

func TestRetryError(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{})
	d.onApply = func(loadbalancer.Action) error {
		return fmt.Errorf("cloud says: %w", api.NewRetryError("quota window", 42*time.Second))
	}
	_, err := r.EnsureLoadBalancer(t.Context(), "c1", lbService(), threeNodes())
	var re *api.RetryError
	if !errors.As(err, &re) || re.RetryAfter() < 42*time.Second || re.RetryAfter() >= 84*time.Second {
		t.Errorf("Ensure with a driver RetryError: %v; want a RetryError findable with errors.As, after 42s plus up to as much at random", err)
	}

	// No address yet: the Reconciler asks to be called again.
	r2 := newReconcilerOver(t, &stripIngress{newMemDriver()}, loadbalancer.Options{RetryAfter: 7 * time.Second})
	_, err = r2.EnsureLoadBalancer(t.Context(), "c1", lbService(), threeNodes())
	if !errors.As(err, &re) || re.RetryAfter() != 7*time.Second || !strings.Contains(err.Error(), "no address yet") {
		t.Errorf("Ensure without an address: %v; want a RetryError after 7s", err)
	}
	if _, exists, err := r2.GetLoadBalancer(t.Context(), "c1", lbService()); !exists || err != nil {
		t.Errorf("Get of a provisioning load balancer = %v, %v; want true, nil", exists, err)
	}
}

type stripIngress struct{ *memDriver }

func (d *stripIngress) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	lb, err := d.memDriver.Apply(ctx, a)
	if lb != nil {
		lb.Ingress = nil
		d.mu.Lock()
		d.lbs[lb.ID].Ingress = nil
		d.mu.Unlock()
	}
	return lb, err
}

func TestPartialCreateIsFinished(t *testing.T) {
	base := newMemDriver()
	r := newReconcilerOver(t, &stepCreate{base}, loadbalancer.Options{})
	mustEnsure(t, r, "c1", lbService(), threeNodes())
	applied, _ := base.writes()
	if diff := cmp.Diff(kinds(loadbalancer.ActionCreate, loadbalancer.ActionAddBackends), applied); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	mustEnsure(t, r, "c1", lbService(), threeNodes())
	if applied, _ := base.writes(); len(applied) != 0 {
		t.Errorf("second Ensure wrote %v", applied)
	}
}

// stepCreate creates load balancers without backends, as a cloud that
// needs a second call for them.
type stepCreate struct{ *memDriver }

func (d *stepCreate) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	if a.Kind == loadbalancer.ActionCreate {
		c := a.Create.Clone()
		c.Spec.Backends = nil
		a.Create = c
	}
	return d.memDriver.Apply(ctx, a)
}

func TestAdoptionByID(t *testing.T) {
	set := &annotation.Set{}
	idAnn := set.MustDeclare(annotation.Annotation{Name: "lb.example.com/id", Kind: annotation.KindString, Doc: "Cloud ID to adopt."})
	withID := func(id string) *v1.Service {
		return lbService(func(s *v1.Service) { s.Annotations = map[string]string{idAnn.Name: id} })
	}
	t.Run("untagged is adopted", func(t *testing.T) {
		r, d := newReconciler(t, loadbalancer.Options{Annotations: set, IDAnnotation: idAnn})
		d.lbs["lb-old"] = &loadbalancer.LoadBalancer{ID: "lb-old", Name: "hand-made", Tags: map[string]string{"team": "x"},
			Ingress: []loadbalancer.Ingress{{IP: "198.51.100.1"}}}
		st := mustEnsure(t, r, "c1", withID("lb-old"), threeNodes())
		if st.Ingress[0].IP != "198.51.100.1" {
			t.Errorf("status %v; want the adopted address", st)
		}
		applied, _ := d.writes()
		if len(applied) == 0 || applied[0] != loadbalancer.ActionUpdateTags || slices.Contains(applied, loadbalancer.ActionCreate) {
			t.Errorf("writes %v; want tags first and no create", applied)
		}
		lb := d.stored()["lb-old"]
		if lb.Tags["team"] != "x" || lb.Tags[loadbalancer.TagCluster] != "c1" || lb.Name != "hand-made" {
			t.Errorf("adopted load balancer %+v: want its own tags and name kept plus ours", lb)
		}
		mustEnsure(t, r, "c1", withID("lb-old"), threeNodes())
		if applied, _ := d.writes(); len(applied) != 0 {
			t.Errorf("second Ensure wrote %v", applied)
		}
		if err := r.EnsureLoadBalancerDeleted(t.Context(), "c1", withID("lb-old")); err != nil || len(d.stored()) != 0 {
			t.Errorf("Delete = %v, left %v", err, d.stored())
		}
	})
	t.Run("owned by another cluster", func(t *testing.T) {
		r, d := newReconciler(t, loadbalancer.Options{Annotations: set, IDAnnotation: idAnn})
		d.lbs["lb-b"] = &loadbalancer.LoadBalancer{ID: "lb-b", Tags: loadbalancer.OwnerTags(loadbalancer.OwnerOf("cluster-b", lbService()))}
		_, err := r.EnsureLoadBalancer(t.Context(), "c1", withID("lb-b"), threeNodes())
		if !errors.Is(err, loadbalancer.ErrNotOwned) || !strings.Contains(err.Error(), `owned by cluster "cluster-b"`) {
			t.Errorf("Ensure = %v; want ErrNotOwned naming cluster-b", err)
		}
		if err := r.EnsureLoadBalancerDeleted(t.Context(), "c1", withID("lb-b")); err != nil {
			t.Errorf("Delete = %v", err)
		}
		if applied, deleted := d.writes(); len(applied)+len(deleted) != 0 || len(d.stored()) != 1 {
			t.Errorf("wrote %v, deleted %v; want nothing", applied, deleted)
		}
	})
	t.Run("untagged while another is owned", func(t *testing.T) {
		// The Service already owns a load balancer (found by tags) and the
		// annotation names an untagged one: adopting it would give the
		// Service two, managing the owned one would ignore the annotation.
		// Ensure refuses, visibly, and changes nothing.
		var hooked []error
		r, d := newReconciler(t, loadbalancer.Options{Annotations: set, IDAnnotation: idAnn, Hooks: loadbalancer.Hooks{
			UserError: func(_ context.Context, op string, _ *v1.Service, err error) {
				hooked = append(hooked, fmt.Errorf("%s: %w", op, err))
			},
		}})
		st := mustEnsure(t, r, "c1", lbService(), threeNodes())
		owned := onlyLB(t, d)
		d.lbs["lb-old"] = &loadbalancer.LoadBalancer{ID: "lb-old", Name: "hand-made", Tags: map[string]string{"team": "x"},
			Ingress: []loadbalancer.Ingress{{IP: "198.51.100.1"}}}
		d.writes()
		_, err := r.EnsureLoadBalancer(t.Context(), "c1", withID("lb-old"), threeNodes())
		var oe *loadbalancer.OwnershipError
		if !errors.Is(err, loadbalancer.ErrNotOwned) || !errors.As(err, &oe) {
			t.Fatalf("Ensure = %v; want an *OwnershipError (ErrNotOwned)", err)
		}
		if diff := cmp.Diff([]string{owned.ID}, oe.Owned); diff != "" {
			t.Errorf("OwnershipError.Owned (-want +got):\n%s", diff)
		}
		for _, s := range []string{idAnn.Name, `"lb-old"`, fmt.Sprintf("%q", owned.ID)} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Ensure error %q does not name %s", err, s)
			}
		}
		if len(hooked) != 1 || !errors.Is(hooked[0], loadbalancer.ErrNotOwned) || !strings.HasPrefix(hooked[0].Error(), "EnsureLoadBalancer: ") {
			t.Errorf("UserError hook calls %v; want one from EnsureLoadBalancer with ErrNotOwned", hooked)
		}
		if applied, deleted := d.writes(); len(applied)+len(deleted) != 0 {
			t.Errorf("wrote %v, deleted %v; want nothing", applied, deleted)
		}
		if got, _, err := r.GetLoadBalancer(t.Context(), "c1", withID("lb-old")); err != nil || !cmp.Equal(st, got) {
			t.Errorf("GetLoadBalancer = %v, %v; want the owned load balancer's status %v", got, err, st)
		}
		// Deleting the Service deletes only what it owns; then the
		// annotation adopts as documented.
		if err := r.EnsureLoadBalancerDeleted(t.Context(), "c1", withID("lb-old")); err != nil {
			t.Fatalf("Delete = %v", err)
		}
		if _, deleted := d.writes(); !slices.Equal(deleted, []string{owned.ID}) {
			t.Errorf("deleted %v; want only the owned %q", deleted, owned.ID)
		}
		if st := mustEnsure(t, r, "c1", withID("lb-old"), threeNodes()); st.Ingress[0].IP != "198.51.100.1" {
			t.Errorf("after the owned one is gone, Ensure status %v; want the adopted address", st)
		}
	})
	t.Run("missing ID", func(t *testing.T) {
		r, d := newReconciler(t, loadbalancer.Options{Annotations: set, IDAnnotation: idAnn})
		_, err := r.EnsureLoadBalancer(t.Context(), "c1", withID("lb-gone"), threeNodes())
		if !errors.Is(err, loadbalancer.ErrNotFound) || !strings.Contains(err.Error(), `"lb-gone"`) {
			t.Errorf("Ensure = %v; want ErrNotFound naming the ID", err)
		}
		if applied, _ := d.writes(); len(applied) != 0 {
			t.Errorf("wrote %v; want nothing", applied)
		}
		if err := r.EnsureLoadBalancerDeleted(t.Context(), "c1", withID("lb-gone")); err != nil {
			t.Errorf("Delete with a stale ID annotation = %v; want nil", err)
		}
	})
}

func TestClusterIdentity(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{ClusterID: "fixed"})
	mustEnsure(t, r, "kubernetes", lbService(), threeNodes())
	for _, lb := range d.stored() {
		if lb.Tags[loadbalancer.TagCluster] != "fixed" {
			t.Errorf("cluster tag %q; want Config.ClusterID", lb.Tags[loadbalancer.TagCluster])
		}
	}
	// The clusterName argument no longer matters.
	if _, exists, _ := r.GetLoadBalancer(t.Context(), "other", lbService()); !exists {
		t.Errorf("Get with another clusterName: exists=false; want Config.ClusterID to win")
	}
	r2, _ := newReconciler(t, loadbalancer.Options{})
	if _, err := r2.EnsureLoadBalancer(t.Context(), "", lbService(), threeNodes()); err == nil || !strings.Contains(err.Error(), "cluster identity is empty") {
		t.Errorf("Ensure without a cluster identity: %v", err)
	}
	noUID := lbService(func(s *v1.Service) { s.UID = "" })
	if _, err := r2.EnsureLoadBalancer(t.Context(), "c1", noUID, nil); !errors.Is(err, loadbalancer.ErrInvalidService) {
		t.Errorf("Ensure without a UID: %v; want ErrInvalidService", err)
	}
}

func TestArgumentsNotMutated(t *testing.T) {
	set, _ := testAnnotations(t)
	r, _ := newReconciler(t, loadbalancer.Options{Annotations: set})
	svc := lbService(func(s *v1.Service) {
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053})
		s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.1/8"}
		s.Annotations = map[string]string{"lb.example.com/algorithm": "least-connections"}
	})
	nodes := []*v1.Node{node("n2", "fd00::2", "10.0.0.2"), node("n1", "10.0.0.1", "fd00::1")}
	svcBefore, nodesBefore := svc.DeepCopy(), deepCopyNodes(nodes)
	ctx := t.Context()
	mustEnsure(t, r, "c1", svc, nodes)
	_ = r.UpdateLoadBalancer(ctx, "c1", svc, nodes)
	_, _, _ = r.GetLoadBalancer(ctx, "c1", svc)
	_ = r.GetLoadBalancerName(ctx, "c1", svc)
	_ = r.EnsureLoadBalancerDeleted(ctx, "c1", svc)
	if diff := cmp.Diff(svcBefore, svc); diff != "" {
		t.Errorf("Service modified (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(nodesBefore, nodes); diff != "" {
		t.Errorf("Nodes modified (-before +after):\n%s", diff)
	}
}

// TestSerialized runs Ensure and Update for one Service concurrently; the
// driver flags any two calls in flight at once.
func TestSerialized(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{})
	mustEnsure(t, r, "c1", lbService(), threeNodes())
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes := threeNodes()[:1+i%3]
			if i%2 == 0 {
				_, _ = r.EnsureLoadBalancer(context.Background(), "c1", lbService(), nodes)
			} else {
				_ = r.UpdateLoadBalancer(context.Background(), "c1", lbService(), nodes)
			}
		}()
	}
	wg.Wait()
	if d.overlap.Load() {
		t.Errorf("driver calls for one Service overlapped")
	}
	if n := len(d.stored()); n != 1 {
		t.Errorf("%d load balancers; want 1", n)
	}
}

func TestActionHook(t *testing.T) {
	var got []string
	r, _ := newReconciler(t, loadbalancer.Options{Hooks: loadbalancer.Hooks{
		Action: func(_ context.Context, svc *v1.Service, a loadbalancer.Action, err error) {
			got = append(got, fmt.Sprintf("%s %s %v", svc.Name, a.Kind, err))
		},
	}})
	mustEnsure(t, r, "c1", lbService(), threeNodes())
	if diff := cmp.Diff([]string{"web CreateLoadBalancer <nil>"}, got); diff != "" {
		t.Errorf("Action hook calls (-want +got):\n%s", diff)
	}
}

func TestNewReconcilerErrors(t *testing.T) {
	set := &annotation.Set{}
	ip := set.MustDeclare(annotation.Annotation{Name: "x.io/ip", Kind: annotation.KindIP, Doc: "d"})
	undeclared := &annotation.Annotation{Name: "x.io/id", Kind: annotation.KindString}
	d := newMemDriver()
	var typedNil *memDriver
	cases := []struct {
		name, reason string
		driver       loadbalancer.Driver
		opts         loadbalancer.Options
		want         string
	}{
		{name: "no driver", reason: "nothing to talk to", driver: nil,
			want: "loadbalancer.NewReconciler: driver is nil: expected a non-nil loadbalancer.Driver"},
		{name: "typed nil driver", reason: "a nil *T in the interface is no driver either", driver: typedNil,
			want: "loadbalancer.NewReconciler: driver is a nil *loadbalancer_test.memDriver: expected a non-nil loadbalancer.Driver"},
		{name: "bad naming", reason: "naming is validated", driver: d, opts: loadbalancer.Options{Naming: loadbalancer.NamerOptions{MaxLength: 5}},
			want: `loadbalancer.NewReconciler: Options.Naming.MaxLength 5: expected 0 (the default, 63) or at least 17 (prefix "k8s", a separator and a 13-character hash)`},
		{name: "wrong kind", reason: "the ID annotation is a string", driver: d, opts: loadbalancer.Options{Annotations: set, IDAnnotation: ip},
			want: `loadbalancer.NewReconciler: Options.IDAnnotation "x.io/ip" is of kind IP: expected string`},
		{name: "undeclared", reason: "annotations come from the set", driver: d, opts: loadbalancer.Options{Annotations: set, IDAnnotation: undeclared},
			want: `loadbalancer.NewReconciler: Options.IDAnnotation "x.io/id" is not declared in Options.Annotations: expected an annotation returned by its Declare`},
		{name: "negative retry", reason: "a retry delay cannot be none (A4)", driver: d, opts: loadbalancer.Options{RetryAfter: -time.Second},
			want: "loadbalancer.NewReconciler: Options.RetryAfter -1s: expected 0 (the default, 10s) or more"},
		{name: "unknown backend key", reason: "backend keys are closed", driver: d, opts: loadbalancer.Options{Capabilities: loadbalancer.Capabilities{BackendKey: "VM"}},
			want: `loadbalancer.NewReconciler: Options.Capabilities.BackendKey "VM": expected "" (node name, the zero value), "ProviderID" or "Address"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := loadbalancer.NewReconciler(tc.driver, tc.opts)
			if r != nil || err == nil {
				t.Fatalf("%s: NewReconciler = %v, %v; want an error", tc.reason, r, err)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("%s: NewReconciler error (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// nilFind is a buggy Driver whose Find reports a nil load balancer.
type nilFind struct{ *memDriver }

func (d nilFind) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	lbs, err := d.memDriver.Find(ctx, q)
	return append(lbs, nil), err
}

// TestNilFromFindIsAnError checks that a Driver reporting a nil load
// balancer gets an error naming it, not a panic, and that the Service's
// lock is released (a second call returns).
func TestNilFromFindIsAnError(t *testing.T) {
	r := newReconcilerOver(t, nilFind{newMemDriver()}, loadbalancer.Options{})
	svc := lbService()
	ctx := t.Context()
	for i := range 2 {
		if _, _, err := r.GetLoadBalancer(ctx, "c1", svc); err == nil || !strings.Contains(err.Error(), "nil load balancer") {
			t.Errorf("call %d: GetLoadBalancer error = %v; want one naming the nil load balancer", i, err)
		}
		if _, err := r.EnsureLoadBalancer(ctx, "c1", svc, threeNodes()); err == nil || !strings.Contains(err.Error(), "nil load balancer") {
			t.Errorf("call %d: EnsureLoadBalancer error = %v; want one naming the nil load balancer", i, err)
		}
		if err := r.UpdateLoadBalancer(ctx, "c1", svc, threeNodes()); err == nil || !strings.Contains(err.Error(), "nil load balancer") {
			t.Errorf("call %d: UpdateLoadBalancer error = %v; want one naming the nil load balancer", i, err)
		}
		if err := r.EnsureLoadBalancerDeleted(ctx, "c1", svc); err == nil || !strings.Contains(err.Error(), "nil load balancer") {
			t.Errorf("call %d: EnsureLoadBalancerDeleted error = %v; want one naming the nil load balancer", i, err)
		}
	}
}

// twiceFind is a buggy Driver whose Find reports each load balancer it
// finds twice, as one paged API answer merged with itself would.
type twiceFind struct{ *memDriver }

func (d twiceFind) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	lbs, err := d.memDriver.Find(ctx, q)
	for _, lb := range slices.Clone(lbs) {
		lbs = append(lbs, lb.Clone())
	}
	return lbs, err
}

// TestRepeatedIDFromFindIsAnError checks that a Driver whose Find lists
// one load balancer twice gets an error wrapping ErrInconsistent that
// names it, counted once per answer, and that the Reconciler then changes
// nothing: neither copy is taken for a duplicate and deleted.
func TestRepeatedIDFromFindIsAnError(t *testing.T) {
	mem := newMemDriver()
	svc := lbService()
	mustEnsure(t, newReconcilerOver(t, mem, loadbalancer.Options{}), "c1", svc, threeNodes())
	lb := onlyLB(t, mem)
	r := newReconcilerOver(t, twiceFind{mem}, loadbalancer.Options{})
	mem.writes()
	before, finds := inconsistentAnswers(t), mem.findCalls()
	ctx := t.Context()
	checks := map[string]error{
		"GetLoadBalancer":           func() error { _, _, err := r.GetLoadBalancer(ctx, "c1", svc); return err }(),
		"EnsureLoadBalancer":        func() error { _, err := r.EnsureLoadBalancer(ctx, "c1", svc, threeNodes()); return err }(),
		"UpdateLoadBalancer":        r.UpdateLoadBalancer(ctx, "c1", svc, threeNodes()),
		"EnsureLoadBalancerDeleted": r.EnsureLoadBalancerDeleted(ctx, "c1", svc),
	}
	for name, err := range checks {
		if err := listcache.CheckInconsistent(err, loadbalancer.ErrNotFound, lb.ID, lb.Name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if applied, deleted := mem.writes(); applied != nil || deleted != nil {
		t.Errorf("writes after the repeated answers: applied %v, deleted %v; want none", applied, deleted)
	}
	if diff := cmp.Diff(map[string]float64{"Find": float64(mem.findCalls() - finds)}, cloudmetrics.Since(inconsistentAnswers(t), before)); diff != "" {
		t.Errorf("ccmkit_cloud_inconsistent_answers_total (-want: one per Find +got):\n%s", diff)
	}
}

// TestGetLoadBalancerNameNilService checks that a nil Service gets an empty
// name rather than a panic (the method has no error result).
func TestGetLoadBalancerNameNilService(t *testing.T) {
	r, _ := newReconciler(t, loadbalancer.Options{})
	if got := r.GetLoadBalancerName(t.Context(), "c1", nil); got != "" {
		t.Errorf("GetLoadBalancerName(nil) = %q; want \"\"", got)
	}
}

// addressBook is a cloudprovider.InstancesV2 that knows the addresses of
// some nodes (by provider ID) and fails for one.
type addressBook struct {
	cloudprovider.InstancesV2
	addrs   map[string][]v1.NodeAddress
	failFor string
	calls   int
}

func (a *addressBook) InstanceMetadata(_ context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	a.calls++
	if n.Spec.ProviderID == a.failFor {
		return nil, errors.New("cloud API timeout")
	}
	addrs, ok := a.addrs[n.Spec.ProviderID]
	if !ok {
		return nil, cloudprovider.InstanceNotFound
	}
	return &cloudprovider.InstanceMetadata{ProviderID: n.Spec.ProviderID, NodeAddresses: addrs}, nil
}

// InstanceExists is true for the nodes whose addresses a knows, and for
// the nodes with an InternalIP of their own (threeNodes()): the book
// lists only the addresses the nodes lack.
func (a *addressBook) InstanceExists(_ context.Context, n *v1.Node) (bool, error) {
	_, ok := a.addrs[n.Spec.ProviderID]
	return ok || len(n.Status.Addresses) > 0, nil
}

// TestBackendsOfNodesWithoutAddressesYet covers the node the cloud-node
// controller has given a provider ID but not yet its addresses: the
// service controller syncs backends then and never again for the address
// patch, so the Reconciler asks Config.Instances for the addresses.
func TestBackendsOfNodesWithoutAddressesYet(t *testing.T) {
	late := node("n4") // provider ID, no addresses
	gone := node("n5")
	book := &addressBook{addrs: map[string][]v1.NodeAddress{
		late.Spec.ProviderID: {{Type: v1.NodeInternalIP, Address: "10.0.0.4"}},
	}}
	before := late.DeepCopy()

	r, d := newReconciler(t, loadbalancer.Options{Instances: book})
	mustEnsure(t, r, "c1", lbService(), append(threeNodes(), late, gone))
	lb := onlyLB(t, d)
	var names []string
	for _, b := range lb.Spec.Backends {
		names = append(names, b.NodeName+"="+b.IPv4.String())
	}
	want := []string{"n1=10.0.0.1", "n2=10.0.0.2", "n3=10.0.0.3", "n4=10.0.0.4"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("backends (-want +got):\n%s\n(n4 has a provider ID and cloud addresses; n5's instance is gone)", diff)
	}
	if book.calls != 2 {
		t.Errorf("InstanceMetadata calls = %d, want 2 (only the two nodes without an InternalIP)", book.calls)
	}
	if diff := cmp.Diff(before, late); diff != "" {
		t.Errorf("the Node argument was modified (-before +after):\n%s", diff)
	}

	// Update, as the service controller calls it on the provider-ID change.
	d.writes()
	r2, d2 := newReconciler(t, loadbalancer.Options{Instances: book})
	mustEnsure(t, r2, "c1", lbService(), threeNodes())
	d2.writes()
	if err := r2.UpdateLoadBalancer(t.Context(), "c1", lbService(), append(threeNodes(), late)); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	if applied, _ := d2.writes(); !slices.Equal(applied, kinds(loadbalancer.ActionAddBackends)) {
		t.Errorf("Update with a node without addresses yet wrote %v; want one AddBackends", applied)
	}

	// Without Instances such a node is left out (documented).
	r3, d3 := newReconciler(t, loadbalancer.Options{})
	mustEnsure(t, r3, "c1", lbService(), append(threeNodes(), late))
	if n := len(onlyLB(t, d3).Spec.Backends); n != 3 {
		t.Errorf("without Config.Instances: %d backends, want 3", n)
	}

	// A lookup failure is an error, and nothing is written.
	book.failFor = late.Spec.ProviderID
	r4, d4 := newReconciler(t, loadbalancer.Options{Instances: book})
	if _, err := r4.EnsureLoadBalancer(t.Context(), "c1", lbService(), append(threeNodes(), late)); err == nil || !strings.Contains(err.Error(), "n4") {
		t.Errorf("Ensure with a failing address lookup: err = %v, want an error naming node n4", err)
	}
	if applied, _ := d4.writes(); len(applied) != 0 {
		t.Errorf("Ensure with a failing address lookup wrote %v", applied)
	}
}

func onlyLB(t *testing.T, d *memDriver) *loadbalancer.LoadBalancer {
	t.Helper()
	lbs := d.stored()
	if len(lbs) != 1 {
		t.Fatalf("%d load balancers stored, want 1", len(lbs))
	}
	for _, lb := range lbs {
		return lb
	}
	return nil
}

// panicOnce is a Driver whose next Find panics once with the value
// panicFind, after which it behaves.
type panicOnce struct {
	*memDriver
	armed atomic.Bool
}

type panicFind struct{}

func (d *panicOnce) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	if d.armed.CompareAndSwap(true, false) {
		panic(panicFind{})
	}
	return d.memDriver.Find(ctx, q)
}

// TestPanickingFindReleasesTheLock checks that a Driver.Find that panics
// lets the panic through to the caller and releases the Service's lock: a
// caller that recovers can call again for the same Service. A regression
// (a lock left held) fails at the deadline instead of hanging the test.
func TestPanickingFindReleasesTheLock(t *testing.T) {
	cases := []struct {
		name, reason string
		call         func(ctx context.Context, r *loadbalancer.Reconciler, svc *v1.Service) error
	}{
		{"GetLoadBalancer", "looks up only", func(ctx context.Context, r *loadbalancer.Reconciler, svc *v1.Service) error {
			_, _, err := r.GetLoadBalancer(ctx, "c1", svc)
			return err
		}},
		{"EnsureLoadBalancer", "looks up after Desired", func(ctx context.Context, r *loadbalancer.Reconciler, svc *v1.Service) error {
			_, err := r.EnsureLoadBalancer(ctx, "c1", svc, threeNodes())
			return err
		}},
		{"UpdateLoadBalancer", "looks up, then plans backends", func(ctx context.Context, r *loadbalancer.Reconciler, svc *v1.Service) error {
			return r.UpdateLoadBalancer(ctx, "c1", svc, threeNodes())
		}},
		{"EnsureLoadBalancerDeleted", "looks up, then deletes", func(ctx context.Context, r *loadbalancer.Reconciler, svc *v1.Service) error {
			return r.EnsureLoadBalancerDeleted(ctx, "c1", svc)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &panicOnce{memDriver: newMemDriver()}
			r := newReconcilerOver(t, d, loadbalancer.Options{})
			svc := lbService()
			mustEnsure(t, r, "c1", svc, threeNodes())
			d.armed.Store(true)
			func() {
				defer func() {
					if got := recover(); got != (panicFind{}) {
						t.Errorf("%s: %s recovered %v; want the Driver's panic value", tc.reason, tc.name, got)
					}
				}()
				_ = tc.call(t.Context(), r, svc)
			}()
			done := make(chan error, 1)
			go func() { done <- tc.call(t.Context(), r, svc) }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: second %s = %v; want nil", tc.reason, tc.name, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: second %s for the same Service did not return: the first call's panic left the Service's lock held", tc.reason, tc.name)
			}
		})
	}
}

// TestSeveralOwnedLowestIDWins: when the cloud holds more than one load
// balancer owned by the Service (a lost create response retried, two
// replicas racing), every call acts on the same one, the lowest ID, however
// the Driver orders its Find results (memDriver's are in map order).
func TestSeveralOwnedLowestIDWins(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{})
	tags := loadbalancer.OwnerTags(loadbalancer.OwnerOf("c1", lbService()))
	for _, lb := range []struct{ id, ip string }{{"lb-2", "192.0.2.2"}, {"lb-1", "192.0.2.1"}, {"lb-3", "192.0.2.3"}} {
		d.lbs[lb.id] = &loadbalancer.LoadBalancer{ID: lb.id, Name: lb.id, Tags: tags, Ingress: []loadbalancer.Ingress{{IP: lb.ip}}}
	}
	for range 20 {
		st, ok, err := r.GetLoadBalancer(t.Context(), "c1", lbService())
		if err != nil || !ok || len(st.Ingress) != 1 || st.Ingress[0].IP != "192.0.2.1" {
			t.Fatalf("GetLoadBalancer = %v, %v, %v; want lb-1's ingress 192.0.2.1 every time", st, ok, err)
		}
	}
}

// TestDerivedResults: a Driver may answer an Apply other than a creation
// without a load balancer ("exactly the action was applied"); the
// Reconciler derives the result with loadbalancer.Apply, so a plan of k
// actions costs one Find and no other read, and ends where a Driver that
// answers with the load balancer ends.
func TestDerivedResults(t *testing.T) {
	base := newMemDriver()
	r := newReconcilerOver(t, nilResults{base}, loadbalancer.Options{})
	mustEnsure(t, r, "c1", lbService(), threeNodes())
	base.writes()
	svc, nodes := sixSteps()
	finds := base.findCalls()
	st := mustEnsure(t, r, "c1", svc, nodes)
	if got := base.findCalls() - finds; got != 1 {
		t.Errorf("a plan of six actions answered without load balancers cost %d Finds; want 1, the look-up", got)
	}
	if diff := cmp.Diff(sixStepKinds, base.takeApplied()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if len(st.Ingress) != 1 || st.Ingress[0].IP != "203.0.113.1" {
		t.Errorf("status %+v; want the address of the load balancer, kept by the derived results", st)
	}
	calm, cd := newReconciler(t, loadbalancer.Options{})
	mustEnsure(t, calm, "c1", lbService(), threeNodes())
	mustEnsure(t, calm, "c1", svc, nodes)
	if diff := cmp.Diff(cd.stored(), base.stored(), cmpOpts); diff != "" {
		t.Errorf("load balancers (-Driver answering with them +Driver answering nil):\n%s", diff)
	}
	mustEnsure(t, r, "c1", svc, nodes)
	if applied := base.takeApplied(); len(applied) != 0 {
		t.Errorf("a second Ensure wrote %v; want nothing", applied)
	}
	finds = base.findCalls()
	if err := r.UpdateLoadBalancer(t.Context(), "c1", svc, threeNodes()); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	if got := base.findCalls() - finds; got != 1 {
		t.Errorf("UpdateLoadBalancer of two actions answered without load balancers cost %d Finds; want 1", got)
	}
}

// nilCreate is memDriver answering a creation without the load balancer.
type nilCreate struct{ *memDriver }

func (d nilCreate) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	lb, err := d.memDriver.Apply(ctx, a)
	if a.Kind == loadbalancer.ActionCreate {
		return nil, err
	}
	return lb, err
}

// TestUnderivableResults: an answer without a load balancer the
// Reconciler cannot derive is an error naming what was expected: a
// creation's (its new ID is the Driver's), and one whose action does not
// apply to the load balancer it was planned on.
func TestUnderivableResults(t *testing.T) {
	r := newReconcilerOver(t, nilCreate{newMemDriver()}, loadbalancer.Options{})
	_, err := r.EnsureLoadBalancer(t.Context(), "c1", lbService(), threeNodes())
	if want := "CreateLoadBalancer on load balancer \"\": driver returned no load balancer: expected the one created, with its new ID"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Ensure over a Driver answering a creation with nil: %v; want an error containing %q", err, want)
	}

	// An answer that drops the listeners (the cloud did something else),
	// then one without a load balancer to an update of a listener: the
	// update does not apply to what the Reconciler has.
	base := newMemDriver()
	r = newReconcilerOver(t, &dropListeners{nilResults{base}}, loadbalancer.Options{})
	mustEnsure(t, r, "c1", lbService(), threeNodes())
	svc, nodes := sixSteps()
	_, err = r.EnsureLoadBalancer(t.Context(), "c1", svc, nodes)
	if want := "UpdateListener on load balancer \"lb-1\": driver returned no load balancer, and the action does not apply to the one it was planned on (listener "; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Ensure: %v; want an error containing %q", err, want)
	}
}

// dropListeners is nilResults answering UpdateSourceRanges with the load
// balancer without its listeners.
type dropListeners struct{ nilResults }

func (d *dropListeners) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	lb, err := d.nilResults.Apply(ctx, a)
	if err != nil || a.Kind != loadbalancer.ActionUpdateSourceRanges {
		return lb, err
	}
	out := d.stored()[a.LoadBalancerID]
	out.Spec.Listeners = nil
	return out, nil
}

// TestDeadTargetsUnderEveryKey: with Options.Instances, a Node whose
// instance is gone (InstanceExists false) is never sent as a new backend,
// in a creation or an AddBackends, whatever the BackendKey: its Node
// object lingers with the InternalIP of its last life until the
// cloud-node-lifecycle controller deletes it, and an address-keyed or
// name-keyed cloud would send traffic there. The Nodes alive are served.
func TestDeadTargetsUnderEveryKey(t *testing.T) {
	for _, key := range []loadbalancer.BackendKey{loadbalancer.BackendKeyNodeName, loadbalancer.BackendKeyProviderID, loadbalancer.BackendKeyAddress} {
		t.Run(fmt.Sprintf("key=%q", key), func(t *testing.T) {
			alive := append(threeNodes(), node("n4", "10.0.0.4"))
			book := &instanceBook{addrs: map[string][]v1.NodeAddress{}}
			for _, n := range alive {
				book.addrs[n.Spec.ProviderID] = n.Status.Addresses
			}
			gone, gone2 := node("gone", "10.0.0.9"), node("gone2", "10.0.0.8") // InternalIPs, no instance
			var log skipLog
			r, d := newReconciler(t, loadbalancer.Options{Instances: book, Capabilities: withKey(key), Hooks: loadbalancer.Hooks{NodeSkipped: log.hook}})
			var sent []string // the Nodes of the backends each Create and AddBackends sent
			d.onApply = func(a loadbalancer.Action) error {
				bs := a.Backends
				if a.Kind == loadbalancer.ActionCreate {
					bs = a.Create.Spec.Backends
				}
				for _, b := range bs {
					sent = append(sent, b.NodeName)
				}
				return nil
			}
			mustEnsure(t, r, "c1", lbService(), append(threeNodes(), gone))
			if err := r.UpdateLoadBalancer(t.Context(), "c1", lbService(), append(slices.Clone(alive), gone, gone2)); err != nil {
				t.Fatalf("UpdateLoadBalancer: %v", err)
			}
			if diff := cmp.Diff([]string{"n1", "n2", "n3", "n4"}, sent); diff != "" {
				t.Errorf("backends sent (-want +got):\n%s\n(gone and gone2 have no instance)", diff)
			}
			var names []string
			for _, b := range onlyLB(t, d).Spec.Backends {
				names = append(names, b.NodeName)
			}
			if diff := cmp.Diff([]string{"n1", "n2", "n3", "n4"}, names); diff != "" {
				t.Errorf("backends (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"gone", "gone2"}, log.take()); diff != "" {
				t.Errorf("reported (-want +got):\n%s", diff)
			}
		})
	}
}
