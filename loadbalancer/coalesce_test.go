package loadbalancer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// The coalescing tests run in a synctest bubble on the Reconciler's
// default clock, the real one, whose time there is virtual: time.Sleep
// passes a window at once, and synctest.Wait lets its write finish.

const window = 2 * time.Second

// coalescing returns a Reconciler with a window over d, and, as
// Initialize would give it, an event log.
func coalescing(t *testing.T, d loadbalancer.Driver, caps loadbalancer.Capabilities) (*loadbalancer.Reconciler, *eventLog) {
	t.Helper()
	r := newReconcilerOver(t, d, loadbalancer.Options{Capabilities: caps, CoalesceWindow: window})
	events := &eventLog{}
	loadbalancer.SetRecorder(r, events)
	return r, events
}

// coalescedOne returns a coalescing Reconciler over a memory Driver
// holding svc's load balancer with one backend, n1, its writes taken.
func coalescedOne(t *testing.T) (*memDriver, *loadbalancer.Reconciler, *eventLog, *v1.Service) {
	t.Helper()
	d := newMemDriver()
	r, events := coalescing(t, d, allCaps)
	svc := lbService()
	mustEnsure(t, r, "c1", svc, nodesN("n1"))
	d.writes()
	return d, r, events, svc
}

// mustUpdate calls UpdateLoadBalancer for svc in cluster c1 and fails the
// test on an error.
func mustUpdate(t *testing.T, r *loadbalancer.Reconciler, svc *v1.Service, nodes []*v1.Node) {
	t.Helper()
	if err := r.UpdateLoadBalancer(t.Context(), "c1", svc, nodes); err != nil {
		t.Fatalf("UpdateLoadBalancer(%d nodes): %v", len(nodes), err)
	}
}

// nodeNames returns the node names of lb's backends, in order.
func nodeNames(lb *loadbalancer.LoadBalancer) []string {
	var out []string
	for _, b := range lb.Spec.Backends {
		out = append(out, b.NodeName)
	}
	return out
}

func nodesN(names ...string) []*v1.Node {
	out := make([]*v1.Node, len(names))
	for i, n := range names {
		out[i] = node(n, fmt.Sprintf("10.0.0.%d", i+1))
	}
	return out
}

// passWindow lets one window pass and its writes finish.
func passWindow() {
	time.Sleep(window)
	synctest.Wait()
}

// TestCoalescedUpdatesOneWrite: node-sync rounds within a window (Nodes
// joining one by one, one leaving) are one write, of the last set, at the
// end of the window; a Node that joined and left within it is never
// written; the service controller's calls all return at once, with no
// cloud call.
func TestCoalescedUpdatesOneWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, r, _, svc := coalescedOne(t)
		finds := d.findCalls()

		rounds := [][]*v1.Node{nodesN("n1", "n2"), nodesN("n1", "n2", "gone"), nodesN("n1", "n2", "n3"), nodesN("n1", "n2", "n3", "n4")}
		for i, nodes := range rounds {
			if err := r.UpdateLoadBalancer(t.Context(), "c1", svc, nodes); err != nil {
				t.Fatalf("UpdateLoadBalancer round %d: %v", i, err)
			}
			time.Sleep(window / 10)
		}
		if a, _ := d.writes(); len(a) != 0 || d.findCalls() != finds {
			t.Fatalf("within the window: writes %v, %d Finds; want none: the calls are deferred", a, d.findCalls()-finds)
		}
		passWindow()
		a, _ := d.writes()
		if want := kinds(loadbalancer.ActionAddBackends); !slices.Equal(a, want) {
			t.Errorf("after the window: writes %v; want %v (one write for 4 rounds)", a, want)
		}
		if got, want := nodeNames(onlyLB(t, d)), []string{"n1", "n2", "n3", "n4"}; !slices.Equal(got, want) {
			t.Errorf("backends %v; want %v (the last round's; \"gone\" joined and left within the window)", got, want)
		}
		passWindow()
		if a, _ := d.writes(); len(a) != 0 {
			t.Errorf("a window later: writes %v; want none", a)
		}
	})
}

// TestCoalescedWriteFailure: a write that fails is retried after the
// window, with the latest change; until a write succeeds the Service's
// next UpdateLoadBalancer returns the failure (so the service controller
// retries it and records its event), and the Reconciler records a Warning
// event of the service controller's reason.
func TestCoalescedWriteFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, r, events, svc := coalescedOne(t)
		cloudDown := errors.New("cloud: 500 internal error")
		var failing atomic.Bool
		failing.Store(true)
		d.onApply = func(loadbalancer.Action) error {
			if failing.Load() {
				return cloudDown
			}
			return nil
		}

		mustUpdate(t, r, svc, nodesN("n1", "n2"))
		passWindow()
		if a, _ := d.writes(); len(a) != 1 {
			t.Fatalf("first window: writes %v; want one attempt", a)
		}
		ev := events.take()
		if len(ev) != 1 || ev[0].Type != v1.EventTypeWarning || ev[0].Reason != "UpdateLoadBalancerFailed" || !strings.Contains(ev[0].Message, cloudDown.Error()) {
			t.Errorf("events %+v; want one Warning UpdateLoadBalancerFailed naming the cloud's error", ev)
		}
		err := r.UpdateLoadBalancer(t.Context(), "c1", svc, nodesN("n1", "n2", "n3"))
		if !errors.Is(err, cloudDown) {
			t.Errorf("the next UpdateLoadBalancer = %v; want the failed write's error", err)
		}

		failing.Store(false)
		passWindow() // the retry: after the window doubled once, at most
		passWindow()
		if got, want := nodeNames(onlyLB(t, d)), []string{"n1", "n2", "n3"}; !slices.Equal(got, want) {
			t.Errorf("after the retry: backends %v; want %v (the latest change)", got, want)
		}
		if err := r.UpdateLoadBalancer(t.Context(), "c1", svc, nodesN("n1", "n2", "n3")); err != nil {
			t.Errorf("UpdateLoadBalancer after the retry succeeded: %v; want nil", err)
		}
		passWindow()
	})
}

// TestCoalescedSupersededAndDropped: an EnsureLoadBalancer called after a
// change arrived writes it, so the window writes nothing; a change that
// arrives during that Ensure is not superseded; EnsureLoadBalancerDeleted
// drops what is pending, which is then never written.
func TestCoalescedSupersededAndDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, r, _, svc := coalescedOne(t)

		mustUpdate(t, r, svc, nodesN("n1", "n2"))
		mustEnsure(t, r, "c1", svc, nodesN("n1", "n2"))
		d.writes()
		passWindow()
		if a, _ := d.writes(); len(a) != 0 {
			t.Errorf("after an Ensure superseded the change: writes %v; want none", a)
		}

		// A change arriving while an Ensure runs is newer than its nodes.
		d.onApply = func(a loadbalancer.Action) error {
			if a.Kind == loadbalancer.ActionAddBackends {
				d.onApply = nil
				go func() { _ = r.UpdateLoadBalancer(context.Background(), "c1", svc, nodesN("n1", "n2", "n3", "n4")) }()
				synctest.Wait()
			}
			return nil
		}
		mustEnsure(t, r, "c1", svc, nodesN("n1", "n2", "n3"))
		passWindow()
		if got, want := nodeNames(onlyLB(t, d)), []string{"n1", "n2", "n3", "n4"}; !slices.Equal(got, want) {
			t.Errorf("backends %v; want %v (the change that arrived during the Ensure)", got, want)
		}

		mustUpdate(t, r, svc, nodesN("n9"))
		if err := r.EnsureLoadBalancerDeleted(t.Context(), "c1", svc); err != nil {
			t.Fatal(err)
		}
		d.writes()
		passWindow()
		if a, _ := d.writes(); len(a) != 0 || len(d.stored()) != 0 {
			t.Errorf("after the delete: writes %v, %d load balancers; want none", a, len(d.stored()))
		}
	})
}

// TestCoalescedSharedPool: with shared backend pools, a node-sync round
// for many Services is one pool write per window, not one per round.
func TestCoalescedSharedPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newPoolMemDriver()
		r, _ := coalescing(t, d, pooledCaps)
		svcs := services(10)
		for _, s := range svcs {
			mustEnsure(t, r, "c1", s, nodesN("n1"))
		}
		d.takePoolWrites()
		d.writes()
		for round := 2; round <= 6; round++ {
			nodes := nodesN(slices.Collect(func(yield func(string) bool) {
				for i := 1; i <= round; i++ {
					yield(fmt.Sprintf("n%d", i))
				}
			})...)
			for _, s := range svcs {
				mustUpdate(t, r, s, nodes)
			}
			time.Sleep(window / 10)
		}
		passWindow()
		if w := d.takePoolWrites(); len(w) != 1 {
			t.Errorf("pool writes %v; want 1 for 5 rounds of 10 Services", w)
		}
		if a, _ := d.writes(); len(a) != 0 {
			t.Errorf("load-balancer writes %v; want none (they reference the same pool)", a)
		}
		if got := members(onlyPool(t, d)); len(got) != 6 {
			t.Errorf("pool members %v; want n1..n6", got)
		}

		// A new Service whose Ensure sees a seventh Node references the
		// pool at once and leaves its member change to the window.
		late := services(11)[10]
		mustEnsure(t, r, "c1", late, nodesN("n1", "n2", "n3", "n4", "n5", "n6", "n7"))
		if w := d.takePoolWrites(); len(w) != 0 {
			t.Errorf("Ensure of a Service joining the pool wrote it: %v; want the write left to the window", w)
		}
		passWindow()
		if w := d.takePoolWrites(); len(w) != 1 {
			t.Errorf("pool writes after the window %v; want 1", w)
		}
		if got := members(onlyPool(t, d)); len(got) != 7 {
			t.Errorf("pool members %v; want n1..n7", got)
		}
	})
}

// TestFlush writes what is pending at once.
func TestFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, r, _, svc := coalescedOne(t)
		mustUpdate(t, r, svc, nodesN("n1", "n2"))
		if err := r.Flush(t.Context()); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		if got := nodeNames(onlyLB(t, d)); len(got) != 2 {
			t.Errorf("after Flush: backends %v; want n1, n2", got)
		}
		passWindow()
		if a, _ := d.writes(); len(a) != 1 {
			t.Errorf("writes %v; want the one Flush made", a)
		}
	})
}

// TestCoalescedStopsWithInitialize: what is pending when Initialize's
// context ends is not written (the next leader ensures every Service).
func TestCoalescedStopsWithInitialize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newMemDriver()
		r, _ := coalescing(t, d, allCaps)
		ctx, cancel := context.WithCancel(t.Context())
		r.Initialize(ctx, nil)
		svc := lbService()
		mustEnsure(t, r, "c1", svc, nodesN("n1"))
		d.writes()
		mustUpdate(t, r, svc, nodesN("n1", "n2"))
		cancel()
		passWindow()
		if a, _ := d.writes(); len(a) != 0 {
			t.Errorf("writes after the Reconciler's context ended: %v; want none", a)
		}
	})
}

// TestCoalesceWindowNegative: a negative window is an error naming it.
func TestCoalesceWindowNegative(t *testing.T) {
	_, err := loadbalancer.NewReconciler(newMemDriver(), loadbalancer.Options{CoalesceWindow: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "Options.CoalesceWindow -1s: expected 0") {
		t.Errorf("NewReconciler with CoalesceWindow -1s = %v; want an error naming the field, the value and what is expected", err)
	}
}

// TestCoalescedBadArguments: a deferred call checks its arguments at once.
func TestCoalescedBadArguments(t *testing.T) {
	r, _ := coalescing(t, newMemDriver(), allCaps)
	if err := r.UpdateLoadBalancer(t.Context(), "c1", nil, nil); err == nil {
		t.Error("UpdateLoadBalancer(nil Service) = nil; want an error")
	}
	if err := r.UpdateLoadBalancer(t.Context(), "", lbService(), nil); err == nil {
		t.Error("UpdateLoadBalancer with no cluster = nil; want an error")
	}
	noUID := lbService(func(s *v1.Service) { s.UID = "" })
	if err := r.UpdateLoadBalancer(t.Context(), "c1", noUID, nil); err == nil || !strings.Contains(err.Error(), "metadata.uid") {
		t.Errorf("UpdateLoadBalancer without a UID = %v; want an error naming metadata.uid", err)
	}
}
