package governor_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// TestConcurrentAdmit: many goroutines calling at once on a clock that
// stands still share the bucket exactly: Burst calls in all, and the lower
// priorities no more than they may take above their reserves, whatever
// the interleaving. Run with -race.
func TestConcurrentAdmit(t *testing.T) {
	const burst, workers, calls = 60, 8, 100
	g := newGovernor(t, newClock(), governor.Options{Writes: governor.Limit{Rate: 1, Burst: burst, NormalReserve: 15, BackgroundReserve: 30}})
	var byPriority [3]atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				p := governor.Priority((w + i) % 3) //nolint:gosec // G115: 0, 1 or 2
				if g.Admit(governor.Writes, p) == nil {
					byPriority[p].Add(1)
				}
			}
		})
	}
	wg.Wait()
	urgent, normal, background := byPriority[0].Load(), byPriority[1].Load(), byPriority[2].Load()
	if total := urgent + normal + background; total != burst {
		t.Errorf("admitted %d calls in all, want exactly the burst, %d", total, burst)
	}
	if background > burst-30 || normal+background > burst-15 {
		t.Errorf("admitted %d background and %d normal calls, want at most %d and %d in all: the reserves hold under contention", background, normal, burst-30, burst-15)
	}
}

// TestConcurrentWrappers runs the wrappers, Observe and a moving clock at
// once, for the race detector; every call either reaches the cloud or is
// refused, never both and never neither.
func TestConcurrentWrappers(t *testing.T) {
	clk := newClock()
	g := newGovernor(t, clk, governor.Options{})
	c := newCloud()
	lbs, nodes := g.LoadBalancerList(lbAPI{c}), g.InstanceList(instanceAPI{c})
	var refused atomic.Int64
	var wg sync.WaitGroup
	const workers, calls = 6, 200
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				var err error
				switch (w + i) % 4 {
				case 0:
					_, err = lbs.Find(t.Context(), loadbalancer.Query{Name: "a"})
				case 1:
					_, err = lbs.Apply(t.Context(), loadbalancer.Action{Kind: loadbalancer.ActionAddBackends})
				case 2:
					_, err = nodes.GetByID(t.Context(), provider.ProviderID{ID: "i-1"})
				case 3:
					g.Observe(governor.Writes, throttled(time.Millisecond))
					clk.Step(time.Millisecond)
					err = lbs.Delete(t.Context(), c.lb)
				}
				if err != nil {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := int64(len(c.Calls())) + refused.Load(); got != workers*calls {
		t.Errorf("calls that reached the cloud plus refusals: %d, want every call, %d", got, workers*calls)
	}
}
