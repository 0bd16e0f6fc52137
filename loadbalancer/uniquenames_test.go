package loadbalancer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// uniqueCaps is allCaps on a cloud that refuses a second load balancer of
// one name.
var uniqueCaps = func() loadbalancer.Capabilities { c := allCaps; c.UniqueNames = true; return c }()

// newUniqueFixture is newCacheFixture with Capabilities.UniqueNames
// declared and enforced by the cloud.
func newUniqueFixture(t *testing.T, opts loadbalancer.CacheOptions) *cacheFixture {
	t.Helper()
	f := newCacheFixture(t, opts)
	f.d.uniqueNames = true
	f.r = newReconcilerOver(t, f.cache, loadbalancer.Options{Capabilities: uniqueCaps, MaxThrottleWait: -1})
	return f
}

// TestUniqueNamesBringUp: bring-up of n Services over a Cache, side by
// side: without UniqueNames each Service's miss in the list is confirmed
// by a Find before its create; with it the create is the confirmation,
// so bring-up is one List and the n creates.
func TestUniqueNamesBringUp(t *testing.T) {
	const n = 20
	for _, tc := range []struct {
		name string
		f    *cacheFixture
		want lbCalls
	}{
		{"without", newCacheFixture(t, loadbalancer.CacheOptions{TTL: time.Minute}), lbCalls{List: 1, Find: n - 1, Apply: n}},
		{"UniqueNames", newUniqueFixture(t, loadbalancer.CacheOptions{TTL: time.Minute}), lbCalls{List: 1, Apply: n}},
	} {
		for i := range n {
			mustEnsure(t, tc.f.r, "c1", numberedService(i), threeNodes())
		}
		t.Logf("%s: %+v", tc.name, tc.f.d.calls())
		checkLBCalls(t, tc.f.d, tc.want, tc.name+": one List, made by the first Service's look-up; a confirming Find per later Service only without UniqueNames")
		if got := len(tc.f.d.stored()); got != n {
			t.Errorf("%s: %d load balancers; want %d", tc.name, got, n)
		}
	}
}

// TestUniqueNamesSecondCreator: a load balancer the Service owns, created
// behind the Cache's back after its List (by a second replica), is found
// when the create of its name is refused, and converged: one load
// balancer, never two, and the Service gets its ingress.
func TestUniqueNamesSecondCreator(t *testing.T) {
	f := newUniqueFixture(t, loadbalancer.CacheOptions{})
	svc := lbService()
	if _, exists, err := f.r.GetLoadBalancer(t.Context(), "c1", svc); exists || err != nil {
		t.Fatalf("before anything exists: GetLoadBalancer = (%v, %v); want (false, nil)", exists, err)
	}
	other := newReconcilerOver(t, f.d.memDriver, loadbalancer.Options{})
	want := mustEnsure(t, other, "c1", svc, threeNodes()[:2]) // the second creator; the list does not have it
	f.d.writes()
	finds := f.d.findCalls()

	got := mustEnsure(t, f.r, "c1", svc, threeNodes())
	if n := len(f.d.stored()); n != 1 {
		t.Fatalf("%d load balancers in the cloud; want 1: a refused create must find the existing one", n)
	}
	if got.Ingress[0].IP != want.Ingress[0].IP {
		t.Errorf("ingress %v; want the existing load balancer's %v", got.Ingress, want.Ingress)
	}
	applied, _ := f.d.writes()
	if len(applied) != 2 || applied[0] != loadbalancer.ActionCreate || applied[1] != loadbalancer.ActionAddBackends {
		t.Errorf("writes %v; want the refused create, then the third node added to the existing one", applied)
	}
	if got := len(nodeNames(onlyLB(t, f.d.memDriver))); got != 3 {
		t.Errorf("%d backends; want 3 (converged to the call's nodes)", got)
	}
	if got := f.d.findCalls() - finds; got != 1 {
		t.Errorf("%d Finds; want 1 after the refusal: by tags, asked of the cloud", got)
	}
}

// TestUniqueNamesTakenByAnother: a name taken by another owner's load
// balancer since the list is a conflict (ErrNotOwned), found after the
// refused create; nothing is written to it, nothing else is created.
func TestUniqueNamesTakenByAnother(t *testing.T) {
	f := newUniqueFixture(t, loadbalancer.CacheOptions{})
	svc := lbService()
	mustEnsure(t, f.r, "c1", numberedService(1), threeNodes()) // the Cache lists
	namer, err := loadbalancer.NewNamer(loadbalancer.NamerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := namer.Name("c1", svc)
	f.d.mu.Lock()
	f.d.lbs["lb-other"] = &loadbalancer.LoadBalancer{ID: "lb-other", Name: name, Tags: map[string]string{"team": "someone-else"}}
	f.d.mu.Unlock()
	f.d.writes()

	_, err = f.r.EnsureLoadBalancer(t.Context(), "c1", svc, threeNodes())
	if !errors.Is(err, loadbalancer.ErrNotOwned) {
		t.Fatalf("EnsureLoadBalancer = %v; want ErrNotOwned: the name is another's", err)
	}
	if applied, deleted := f.d.writes(); len(applied) != 1 || applied[0] != loadbalancer.ActionCreate || len(deleted) != 0 {
		t.Errorf("writes %v, deletes %v; want only the refused create", applied, deleted)
	}
	if got := f.d.stored()["lb-other"]; got == nil || len(got.Tags) != 1 {
		t.Errorf("the other owner's load balancer is %+v; want it unchanged", got)
	}
}

// nameLiar refuses every create as a name taken, while its Find finds
// nothing: a Driver whose create and Find disagree.
type nameLiar struct{ *listingDriver }

func (d nameLiar) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	if a.Kind == loadbalancer.ActionCreate {
		return nil, fmt.Errorf("liar: 409 name exists: %w", loadbalancer.ErrNameTaken)
	}
	return d.listingDriver.Apply(ctx, a)
}

// TestUniqueNamesRefusalWithoutLoadBalancer: a create refused as a name
// taken when the cloud then finds no load balancer of that name returns
// the refusal (wrapped), creates nothing and does not loop.
func TestUniqueNamesRefusalWithoutLoadBalancer(t *testing.T) {
	d := nameLiar{newListingDriver()}
	c, err := loadbalancer.NewCache(d, loadbalancer.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := newReconcilerOver(t, c, loadbalancer.Options{Capabilities: uniqueCaps, MaxThrottleWait: -1})
	_, err = r.EnsureLoadBalancer(t.Context(), "c1", lbService(), threeNodes())
	if !errors.Is(err, loadbalancer.ErrNameTaken) {
		t.Errorf("EnsureLoadBalancer = %v; want the refusal, wrapping ErrNameTaken", err)
	}
	if n := len(d.stored()); n != 0 {
		t.Errorf("%d load balancers; want none", n)
	}
}
