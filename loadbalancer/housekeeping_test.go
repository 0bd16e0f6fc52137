package loadbalancer_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// TestListOwned: ListOwned returns the load balancers tagged for the
// cluster identity (Options.ClusterID over the clusterName argument), in
// ID order, including one without a Service UID tag, and never another
// cluster's or an untagged one; over a Cache it is answered from the one
// List; without a cluster identity it is an error.
func TestListOwned(t *testing.T) {
	d := newListingDriver()
	for _, lb := range []*loadbalancer.LoadBalancer{
		{ID: "lb-3", Tags: map[string]string{loadbalancer.TagCluster: "ours", loadbalancer.TagServiceUID: "u3"}},
		{ID: "lb-1", Tags: map[string]string{loadbalancer.TagCluster: "ours", loadbalancer.TagServiceUID: "u1"}},
		{ID: "lb-2", Tags: map[string]string{loadbalancer.TagCluster: "theirs", loadbalancer.TagServiceUID: "u2"}},
		{ID: "lb-4", Tags: map[string]string{loadbalancer.TagCluster: "ours"}},
		{ID: "lb-5"},
	} {
		lb.Ingress = []loadbalancer.Ingress{{IP: "192.0.2.1"}} // settled: a Cache vouches for it
		d.lbs[lb.ID] = lb
	}
	c, err := loadbalancer.NewCache(d, loadbalancer.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := loadbalancer.NewReconciler(c, loadbalancer.Options{ClusterID: "ours"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		lbs, err := r.ListOwned(context.Background(), "the-cluster-name")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"lb-1", "lb-3", "lb-4"}, idsOf(lbs)); diff != "" {
			t.Errorf("ListOwned (-want +got):\n%s", diff)
		}
	}
	if n := d.lists.Load(); n != 1 || d.finds != 0 {
		t.Errorf("%d Lists and %d Finds for two ListOwned over a Cache; want one List", n, d.finds)
	}

	// Invalidate reaches the Cache: the next look-up lists again.
	r.Invalidate()
	if _, err := r.ListOwned(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if n := d.lists.Load(); n != 2 {
		t.Errorf("%d Lists after Invalidate: want 2", n)
	}

	bare, err := loadbalancer.NewReconciler(d, loadbalancer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bare.Invalidate() // no cache: nothing to drop, no panic
	if _, err := bare.ListOwned(context.Background(), ""); err == nil {
		t.Error("ListOwned without a cluster identity: no error")
	}
}

func idsOf(lbs []*loadbalancer.LoadBalancer) []string {
	var out []string
	for _, lb := range lbs {
		out = append(out, lb.ID)
	}
	return out
}

// sloppyFinder is a Driver whose Find ignores the query: it returns every
// load balancer, as a Driver may ("it may return more").
type sloppyFinder struct{ *memDriver }

func (d sloppyFinder) Find(context.Context, loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	var out []*loadbalancer.LoadBalancer
	for _, lb := range d.stored() {
		out = append(out, lb)
	}
	return out, nil
}

// TestListOwnedFilters: ListOwned returns only the cluster's load
// balancers even from a Driver whose Find returns more: what it returns
// is what an orphan collector may delete.
func TestListOwnedFilters(t *testing.T) {
	d := newMemDriver()
	d.lbs["lb-1"] = &loadbalancer.LoadBalancer{ID: "lb-1", Tags: map[string]string{loadbalancer.TagCluster: "ours", loadbalancer.TagServiceUID: "u1"}}
	d.lbs["lb-2"] = &loadbalancer.LoadBalancer{ID: "lb-2", Tags: map[string]string{loadbalancer.TagCluster: "theirs", loadbalancer.TagServiceUID: "u2"}}
	d.lbs["lb-3"] = &loadbalancer.LoadBalancer{ID: "lb-3"}
	r, err := loadbalancer.NewReconciler(sloppyFinder{d}, loadbalancer.Options{ClusterID: "ours"})
	if err != nil {
		t.Fatal(err)
	}
	lbs, err := r.ListOwned(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"lb-1"}, idsOf(lbs)); diff != "" {
		t.Errorf("ListOwned over a Find that returns everything (-want +got):\n%s", diff)
	}
}

// TestRepairLoadBalancer: RepairLoadBalancer is EnsureLoadBalancer while
// current holds; when current reports false (checked under the Service's
// lock) it returns ErrStale and makes no Driver call at all; a nil
// current is an error.
func TestRepairLoadBalancer(t *testing.T) {
	d := newMemDriver()
	r, err := loadbalancer.NewReconciler(d, loadbalancer.Options{ClusterID: "ours"})
	if err != nil {
		t.Fatal(err)
	}
	svc, nodes := lbService(), []*v1.Node{node("node-a", "10.0.0.1")}
	if _, err := r.RepairLoadBalancer(context.Background(), "", svc, nodes, func() bool { return false }); !errors.Is(err, loadbalancer.ErrStale) {
		t.Fatalf("RepairLoadBalancer with a stale view: %v, want ErrStale", err)
	}
	if applied, _ := d.writes(); len(applied) != 0 || d.finds != 0 {
		t.Errorf("a stale repair made %d Finds and applied %v: want no Driver call", d.finds, applied)
	}
	checked := false
	if _, err := r.RepairLoadBalancer(context.Background(), "", svc, nodes, func() bool { checked = true; return true }); err != nil {
		t.Fatalf("RepairLoadBalancer with a current view: %v", err)
	}
	if applied, _ := d.writes(); !checked || len(applied) == 0 {
		t.Errorf("a current repair: checked %v, applied %v; want the check made and the load balancer created", checked, applied)
	}
	if _, err := r.RepairLoadBalancer(context.Background(), "", svc, nodes, nil); err == nil {
		t.Error("RepairLoadBalancer with a nil current: no error")
	}
}

// TestStoredID: the ID a Service names in Options.IDAnnotation, only when
// the Reconciler has one and the value is well formed.
func TestStoredID(t *testing.T) {
	set := &annotation.Set{}
	id := set.MustDeclare(annotation.Annotation{Name: "lb.example.com/id", Kind: annotation.KindString, Doc: "a stored ID"})
	with, err := loadbalancer.NewReconciler(newMemDriver(), loadbalancer.Options{Annotations: set, IDAnnotation: id})
	if err != nil {
		t.Fatal(err)
	}
	without, err := loadbalancer.NewReconciler(newMemDriver(), loadbalancer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	annotated := func(v string) *v1.Service {
		return lbService(func(s *v1.Service) { s.Annotations = map[string]string{"lb.example.com/id": v} })
	}
	for _, tc := range []struct {
		name, reason string
		r            *loadbalancer.Reconciler
		svc          *v1.Service
		want         string
		ok           bool
	}{
		{name: "set", reason: "the annotation's value", r: with, svc: annotated(" lb-7 "), want: "lb-7", ok: true},
		{name: "absent", reason: "no annotation on the Service", r: with, svc: lbService()},
		{name: "blank", reason: "a malformed value claims nothing", r: with, svc: annotated("  ")},
		{name: "no IDAnnotation", reason: "the Reconciler has none", r: without, svc: annotated("lb-7")},
		{name: "nil", reason: "no Service", r: with},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.r.StoredID(tc.svc)
			if got != tc.want || ok != tc.ok {
				t.Errorf("StoredID = %q, %v; want %q, %v (%s)", got, ok, tc.want, tc.ok, tc.reason)
			}
		})
	}
}
