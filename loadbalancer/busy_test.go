package loadbalancer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// The tests of a busy cloud run in a synctest bubble on the Reconciler's
// default clock, the real one, whose time there is virtual: a wait of a
// second ends at once, and time.Since measures it exactly.

// sixSteps is the change of lbService() and threeNodes() that the six-step
// tests make: source ranges, affinity, a node port, a new listener, a
// Node added and one removed, one action each.
func sixSteps() (*v1.Service, []*v1.Node) {
	svc := lbService(func(s *v1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.Ports[0].NodePort = 30081
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443})
	})
	return svc, []*v1.Node{node("n1", "10.0.0.1"), node("n2", "10.0.0.2"), node("n4", "10.0.0.4")}
}

// sixStepKinds are the writes of sixSteps, in the order Plan emits them.
var sixStepKinds = kinds(loadbalancer.ActionUpdateSourceRanges, loadbalancer.ActionUpdateSessionAffinity,
	loadbalancer.ActionUpdateListener, loadbalancer.ActionAddListener, loadbalancer.ActionAddBackends, loadbalancer.ActionRemoveBackends)

// ensureLoop calls EnsureLoadBalancer as the service controller does until
// it succeeds: after a RetryError it waits exactly its delay
// (controllers/service/controller.go, processNextServiceItem: AddAfter).
// It returns the delays asked for; any other error fails the test.
func ensureLoop(t *testing.T, r *loadbalancer.Reconciler, svc *v1.Service, nodes []*v1.Node) []time.Duration {
	t.Helper()
	var delays []time.Duration
	for range 20 {
		_, err := r.EnsureLoadBalancer(t.Context(), "c1", svc, nodes)
		if err == nil {
			return delays
		}
		var re *api.RetryError
		if !errors.As(err, &re) {
			t.Fatalf("EnsureLoadBalancer %d: %v; want a RetryError or success", len(delays)+1, err)
		}
		delays = append(delays, re.RetryAfter())
		time.Sleep(re.RetryAfter())
	}
	t.Fatalf("EnsureLoadBalancer did not converge in 20 calls; delays %v", delays)
	return nil
}

// TestSixStepChangeOnABusyCloud is issue 25's acceptance test: a cloud
// busy for a second after each write (refusing a write meanwhile with a
// 409) takes a six-step change in six writes, in two EnsureLoadBalancer
// calls and five seconds: the first call writes, waits a second, writes,
// waits, writes, and asks to come back after exactly the second the cloud
// is busy (the next wait would exceed the default MaxBusyWait, 2s); the
// second writes the other three. Over a Driver that answers each write
// without a load balancer, each Ensure makes one Find and no other read;
// over one that answers with the load balancer, the Reconciler plans
// again from each answer and writes nothing twice.
func TestSixStepChangeOnABusyCloud(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		full         bool
	}{
		{name: "derived results", reason: "each write answered Busy(1s) and no load balancer: derived with Apply"},
		{name: "full results", reason: "each write answered Busy(1s) with the load balancer: planned again from it", full: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newBusyCloud(time.Second)
				c.full = tc.full
				r := newReconcilerOver(t, c, loadbalancer.Options{})
				mustEnsure(t, r, "c1", lbService(), threeNodes())
				time.Sleep(time.Second) // the creation's busy time passes
				c.writes()
				finds := c.findCalls()

				svc, nodes := sixSteps()
				start := time.Now()
				delays := ensureLoop(t, r, svc, nodes)
				elapsed := time.Since(start)
				ensures := len(delays) + 1
				t.Logf("%s: %d writes, %d refused, %d EnsureLoadBalancer calls (RetryAfter %v), %d Finds, %v virtual",
					tc.name, len(c.takeApplied()), c.refusals(), ensures, delays, c.findCalls()-finds, elapsed)

				// What it wrote: the six actions once each (ensureLoop
				// has run them; check the store against a calm cloud's).
				if diff := cmp.Diff([]time.Duration{time.Second}, delays); diff != "" {
					t.Errorf("RetryAfter of the Ensures that stopped (-want +got):\n%s\n(exactly the cloud's busy time, not doubled, no jitter: %s)", diff, tc.reason)
				}
				if elapsed != 5*time.Second {
					t.Errorf("the change took %v; want 5s: two waits in each Ensure and the one requeue (%s)", elapsed, tc.reason)
				}
				if got := c.refusals(); got != 0 {
					t.Errorf("%d writes refused; want none: every write waits out the one before", got)
				}
				if got := c.findCalls() - finds; got != ensures {
					t.Errorf("%d Finds for %d Ensures; want one each, and no read after a write (%s)", got, ensures, tc.reason)
				}
				calm, cd := newReconciler(t, loadbalancer.Options{})
				mustEnsure(t, calm, "c1", lbService(), threeNodes())
				mustEnsure(t, calm, "c1", svc, nodes)
				if diff := cmp.Diff(cd.stored(), c.stored(), cmpOpts); diff != "" {
					t.Errorf("load balancers after the change (-calm cloud +busy cloud):\n%s", diff)
				}
				time.Sleep(time.Second)
				mustEnsure(t, r, "c1", svc, nodes)
				if applied := c.takeApplied(); len(applied) != 0 {
					t.Errorf("an Ensure after the change wrote %v; want nothing: converged", applied)
				}
			})
		})
	}
}

// TestSixStepWrites pins the six writes of sixSteps, in order, each made
// once on the busy cloud.
func TestSixStepWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newBusyCloud(time.Second)
		r := newReconcilerOver(t, c, loadbalancer.Options{})
		mustEnsure(t, r, "c1", lbService(), threeNodes())
		time.Sleep(time.Second)
		c.writes()
		svc, nodes := sixSteps()
		ensureLoop(t, r, svc, nodes)
		if diff := cmp.Diff(sixStepKinds, c.takeApplied()); diff != "" {
			t.Errorf("writes (-want +got):\n%s", diff)
		}
	})
}

// TestSixStepChangeThrottled is the same change on a cloud that says
// "busy" with a 429 (a RetryError) instead: that is throttling, and keeps
// its back-off. Each Ensure makes one write before the next is refused,
// and asks to come back after a delay doubled each time, plus jitter.
func TestSixStepChangeThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newBusyCloud(time.Second)
		c.throttle = true
		r := newReconcilerOver(t, c, loadbalancer.Options{})
		mustEnsure(t, r, "c1", lbService(), threeNodes())
		time.Sleep(time.Second)
		c.writes()
		svc, nodes := sixSteps()
		start := time.Now()
		delays := ensureLoop(t, r, svc, nodes)
		elapsed := time.Since(start)
		t.Logf("throttled: %d writes, %d refused, %d EnsureLoadBalancer calls (RetryAfter %v), %v virtual",
			len(c.takeApplied()), c.refusals(), len(delays)+1, delays, elapsed)
		if len(delays) != 5 {
			t.Fatalf("%d throttled Ensures; want 5: one write each, the sixth call converges", len(delays))
		}
		for i, d := range delays {
			lo := time.Second << i
			if d < lo || d >= 2*lo {
				t.Errorf("throttled Ensure #%d asks for %v; want [%v, %v): the back-off doubles", i+1, d, lo, 2*lo)
			}
		}
	})
}

// TestBusyRefusedWriteIsRetried: a write the cloud refuses because it is
// still busy (409: a BusyError wrapping ErrRefused) changed nothing; the
// Reconciler makes the same write once the time the cloud gave has
// passed.
func TestBusyRefusedWriteIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newBusyCloud(time.Second)
		r := newReconcilerOver(t, c, loadbalancer.Options{})
		mustEnsure(t, r, "c1", lbService(), threeNodes())
		c.writes()
		// At once: the creation left the cloud busy.
		start := time.Now()
		mustEnsure(t, r, "c1", lbService(), []*v1.Node{node("n1", "10.0.0.1"), node("n2", "10.0.0.2"), node("n4", "10.0.0.4")})
		if got, want := time.Since(start), 2*time.Second; got != want {
			t.Errorf("Ensure took %v; want %v: the refusal's second, then the first write's", got, want)
		}
		if got := c.refusals(); got != 1 {
			t.Errorf("%d writes refused; want 1, the first", got)
		}
		if diff := cmp.Diff(kinds(loadbalancer.ActionAddBackends, loadbalancer.ActionRemoveBackends), c.takeApplied()); diff != "" {
			t.Errorf("writes taken (-want +got):\n%s", diff)
		}
	})
}

// TestBusyNeverWait: with a negative MaxBusyWait the Reconciler never
// waits: EnsureLoadBalancer stops after the first busy answer, keeping
// that write, with a RetryError of exactly the cloud's delay that wraps
// the Driver's BusyError.
func TestBusyNeverWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newBusyCloud(1500 * time.Millisecond)
		r := newReconcilerOver(t, c, loadbalancer.Options{MaxBusyWait: -1})
		mustEnsure(t, r, "c1", lbService(), threeNodes())
		time.Sleep(2 * time.Second)
		c.writes()
		svc, nodes := sixSteps()
		_, err := r.EnsureLoadBalancer(t.Context(), "c1", svc, nodes)
		var re *api.RetryError
		var be *loadbalancer.BusyError
		if !errors.As(err, &re) || re.RetryAfter() != 1500*time.Millisecond || !errors.As(err, &be) {
			t.Fatalf("Ensure on a busy cloud, never waiting: %v; want a RetryError of exactly 1.5s wrapping a BusyError", err)
		}
		if !strings.Contains(err.Error(), "Options.MaxBusyWait is negative") {
			t.Errorf("error %q does not name Options.MaxBusyWait", err)
		}
		if got := len(c.takeApplied()); got != 1 {
			t.Errorf("%d writes; want 1, kept", got)
		}
	})
}

// TestBusyIsNotThrottled: a busy cloud's RetryError is neither doubled
// nor counted as a throttled call by the back-off of EnsureLoadBalancer,
// and it ends a run of throttled calls as any other outcome does.
func TestBusyIsNotThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newBusyCloud(time.Second)
		r := newReconcilerOver(t, c, loadbalancer.Options{MaxBusyWait: -1})
		mustEnsure(t, r, "c1", lbService(), threeNodes()) // the cloud is busy from now on
		svc, nodes := sixSteps()
		delay := func(throttled bool) time.Duration {
			t.Helper()
			c.throttle = throttled
			_, err := r.EnsureLoadBalancer(t.Context(), "c1", svc, nodes)
			var re *api.RetryError
			if !errors.As(err, &re) {
				t.Fatalf("Ensure: %v; want a RetryError", err)
			}
			return re.RetryAfter()
		}
		for i, tc := range []struct {
			throttled bool
			lo, hi    time.Duration
			reason    string
		}{
			{throttled: true, lo: time.Second, hi: 2 * time.Second, reason: "the first throttled call: 1s plus jitter"},
			{throttled: true, lo: 2 * time.Second, hi: 4 * time.Second, reason: "the second in a row: doubled"},
			{lo: time.Second, hi: time.Second + 1, reason: "busy: exactly the cloud's second, not doubled"},
			{throttled: true, lo: time.Second, hi: 2 * time.Second, reason: "throttled again: the busy call ended the run"},
		} {
			if d := delay(tc.throttled); d < tc.lo || d >= tc.hi {
				t.Errorf("Ensure #%d asks for %v; want [%v, %v): %s", i+1, d, tc.lo, tc.hi, tc.reason)
			}
		}
	})
}

// TestBusyAndThrottledIsThrottled: an error that wraps both a BusyError
// and a RetryError is throttling, as every block reads it (the Driver doc
// tells Drivers not to).
func TestBusyAndThrottledIsThrottled(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{})
	d.onApply = func(loadbalancer.Action) error {
		return errors.Join(loadbalancer.Busy(time.Second, ""), api.NewRetryError("429", time.Second))
	}
	for i, lo := range []time.Duration{time.Second, 2 * time.Second} {
		_, err := r.EnsureLoadBalancer(t.Context(), "c1", lbService(), threeNodes())
		var re *api.RetryError
		if !errors.As(err, &re) || re.RetryAfter() < lo || re.RetryAfter() >= 2*lo {
			t.Errorf("Ensure #%d: %v; want a RetryError in [%v, %v): throttled, backing off", i+1, err, lo, 2*lo)
		}
	}
}

// checkBusyFailure checks the error of op, a method that does not honour
// a RetryError: nil unless fails, and then one wrapping a BusyError and
// no RetryError.
func checkBusyFailure(t *testing.T, op string, err error, fails bool, reason string) {
	t.Helper()
	var re *api.RetryError
	var be *loadbalancer.BusyError
	switch {
	case !fails && err != nil:
		t.Fatalf("%s: %v (%s)", op, err, reason)
	case fails && (!errors.As(err, &be) || errors.As(err, &re)):
		t.Fatalf("%s: %v; want an error wrapping a BusyError and no RetryError (%s)", op, err, reason)
	}
}

// TestBusyUpdate: UpdateLoadBalancer waits a busy cloud out within
// MaxBusyWait; past it, it returns the busy error (not a RetryError: the
// service controller's node sync does not honour one, it requeues the
// Service, whose next EnsureLoadBalancer finishes the change).
func TestBusyUpdate(t *testing.T) {
	nodes := []*v1.Node{node("n1", "10.0.0.1"), node("n2", "10.0.0.2"), node("n4", "10.0.0.4")} // n4 in, n3 out: two writes
	for _, tc := range []struct {
		name, reason string
		maxWait      time.Duration
		fails        bool
		writes       int
		took         time.Duration
	}{
		{name: "waits", reason: "one wait of 1s fits in the default 2s", writes: 2, took: time.Second},
		{name: "never waits", reason: "MaxBusyWait -1: the first busy answer stops it", maxWait: -1, fails: true, writes: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newBusyCloud(time.Second)
				r := newReconcilerOver(t, c, loadbalancer.Options{MaxBusyWait: tc.maxWait})
				mustEnsure(t, r, "c1", lbService(), threeNodes())
				time.Sleep(time.Second)
				c.writes()
				start := time.Now()
				checkBusyFailure(t, "UpdateLoadBalancer", r.UpdateLoadBalancer(t.Context(), "c1", lbService(), nodes), tc.fails, tc.reason)
				took := time.Since(start)
				if got := len(c.takeApplied()); got != tc.writes || took != tc.took {
					t.Errorf("%d writes in %v; want %d in %v (%s)", got, took, tc.writes, tc.took, tc.reason)
				}
				if tc.fails {
					time.Sleep(time.Second)
					mustEnsure(t, r, "c1", lbService(), nodes)
					if diff := cmp.Diff(kinds(loadbalancer.ActionRemoveBackends), c.takeApplied()); diff != "" {
						t.Errorf("the Ensure after the stopped Update wrote (-want +got):\n%s", diff)
					}
				}
			})
		})
	}
}

// TestBusyDelete: a Delete answered busy (a cascade delete in steps, or a
// refusal while the load balancer is busy) is called again after the
// cloud's delay, within MaxBusyWait and MaxDeleteCalls; past either,
// EnsureLoadBalancerDeleted returns the busy error, not a RetryError.
func TestBusyDelete(t *testing.T) {
	step := func(after time.Duration) error { return loadbalancer.Busy(after, "deleting the pools first") }
	refusal := func(after time.Duration) error {
		return fmt.Errorf("HTTP 409: %w", errors.Join(loadbalancer.Busy(after, "PENDING_UPDATE"), loadbalancer.ErrRefused))
	}
	for _, tc := range []struct {
		name, reason string
		answer       func(after time.Duration) error
		after        time.Duration
		busyCalls    int // the first calls answered busy; -1: all
		maxWait      time.Duration
		fails        bool
		calls        int
		took         time.Duration
	}{
		{name: "steps", reason: "two steps answered busy, the third done: two waits of 1s fit in 2s",
			answer: step, after: time.Second, busyCalls: 2, calls: 3, took: 2 * time.Second},
		{name: "refusals", reason: "refused twice while busy: the same call again",
			answer: refusal, after: time.Second, busyCalls: 2, calls: 3, took: 2 * time.Second},
		{name: "past MaxBusyWait", reason: "the second wait would exceed 1s",
			answer: step, after: time.Second, busyCalls: 2, maxWait: time.Second, fails: true, calls: 2, took: time.Second},
		{name: "past MaxDeleteCalls", reason: "always busy: stops at the bound",
			answer: step, after: time.Millisecond, busyCalls: -1, maxWait: time.Hour, fails: true,
			calls: loadbalancer.MaxDeleteCalls, took: time.Duration(loadbalancer.MaxDeleteCalls-1) * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, d := newReconciler(t, loadbalancer.Options{MaxBusyWait: tc.maxWait})
				mustEnsure(t, r, "c1", lbService(), threeNodes())
				calls := 0
				d.onDelete = func(*loadbalancer.LoadBalancer) error {
					calls++
					if tc.busyCalls < 0 || calls <= tc.busyCalls {
						return tc.answer(tc.after)
					}
					return nil
				}
				start := time.Now()
				checkBusyFailure(t, "EnsureLoadBalancerDeleted", r.EnsureLoadBalancerDeleted(t.Context(), "c1", lbService()), tc.fails, tc.reason)
				took := time.Since(start)
				if calls != tc.calls || took != tc.took {
					t.Errorf("%d Delete calls in %v; want %d in %v (%s)", calls, took, tc.calls, tc.took, tc.reason)
				}
				if left := len(d.stored()); (left == 0) == tc.fails {
					t.Errorf("%d load balancers left; fails=%v (%s)", left, tc.fails, tc.reason)
				}
			})
		})
	}
}

// staleBusy is memDriver answering each write with Busy and the load
// balancer as it was before its first write: a Driver whose answers never
// show its writes, which converge must not follow for ever.
type staleBusy struct {
	*memDriver
	frozen *loadbalancer.LoadBalancer
}

func (d *staleBusy) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	if d.frozen == nil && a.Kind != loadbalancer.ActionCreate {
		d.frozen = d.stored()[a.LoadBalancerID]
	}
	lb, err := d.memDriver.Apply(ctx, a)
	if err != nil || a.Kind == loadbalancer.ActionCreate {
		return lb, err
	}
	return d.frozen.Clone(), loadbalancer.Busy(time.Millisecond, "")
}

// TestConvergeIsBounded: a Driver whose busy answers never show the write
// gets the same action planned again, up to twice the first plan's
// actions and ConvergeSpare, and then an error naming the bound.
func TestConvergeIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &staleBusy{memDriver: newMemDriver()}
		r := newReconcilerOver(t, d, loadbalancer.Options{MaxBusyWait: time.Hour})
		mustEnsure(t, r, "c1", lbService(), threeNodes())
		d.writes()
		_, err := r.EnsureLoadBalancer(t.Context(), "c1", lbService(), append(threeNodes(), node("n4", "10.0.0.4")))
		limit := 2*1 + loadbalancer.ConvergeSpare
		if want := fmt.Sprintf("not converged after %d writes, the most one call makes", limit); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Ensure over a Driver whose answers never show its writes: %v; want an error containing %q", err, want)
		}
		if got := len(d.takeApplied()); got != limit {
			t.Errorf("%d writes; want %d, the bound", got, limit)
		}
	})
}

// TestBusyCallMetrics: a write the cloud took and answered busy is an
// "ok" call in ccmkit_cloud_requests_total; one it refused because it was
// busy is an "error" (its 409), never "throttled".
func TestBusyCallMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newBusyCloud(time.Second)
		r := newReconcilerOver(t, c, loadbalancer.Options{})
		mustEnsure(t, r, "c1", lbService(), threeNodes())
		before, _ := loadBalancerCalls(t)
		// At once: the first write is refused, the second taken (busy).
		if err := r.UpdateLoadBalancer(t.Context(), "c1", lbService(), append(threeNodes(), node("n4", "10.0.0.4"))); err != nil {
			t.Fatalf("UpdateLoadBalancer: %v", err)
		}
		after, _ := loadBalancerCalls(t)
		got := map[string]float64{}
		for k, v := range after {
			if strings.HasPrefix(k, "Apply/") && v != before[k] {
				got[k] = v - before[k]
			}
		}
		if diff := cmp.Diff(map[string]float64{"Apply/ok": 1, "Apply/error": 1}, got); diff != "" {
			t.Errorf("Apply calls recorded (-want +got):\n%s", diff)
		}
	})
}

// ExampleBusy shows the two busy answers of a Driver over a cloud that
// stays busy after each write, as OpenStack Octavia does: "done, busy for
// D" after a write it took, and "refused, nothing changed" for a 409 while
// busy.
func ExampleBusy() {
	// After a write the cloud took; Apply may return a nil load balancer.
	applied := loadbalancer.Busy(time.Second, "load balancer PENDING_UPDATE")
	// A 409 while the load balancer was busy: nothing changed.
	refused := fmt.Errorf("octavia: 409 Conflict: %w%w", loadbalancer.Busy(800*time.Millisecond, "PENDING_UPDATE"), loadbalancer.ErrRefused)

	for _, err := range []error{applied, refused} {
		var b *loadbalancer.BusyError
		errors.As(err, &b)
		fmt.Printf("busy for %v, refused: %v\n", b.After, errors.Is(err, loadbalancer.ErrRefused))
	}
	// Output:
	// busy for 1s, refused: false
	// busy for 800ms, refused: true
}
