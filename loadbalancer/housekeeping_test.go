package loadbalancer_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

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
