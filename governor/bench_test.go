package governor_test

import (
	"context"
	"testing"

	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// unlimited is a budget no benchmark can spend: a token every nanosecond
// and a burst of a million, so every call takes the admitted path.
var unlimited = governor.Limit{Rate: 1e9, Burst: 1_000_000}

// BenchmarkAdmit measures Admit on the admitted path, from every
// GOMAXPROCS goroutine at once on one class (the contention of many
// controller workers), with the real clock.
func BenchmarkAdmit(b *testing.B) {
	g := newGovernor(b, nil, governor.Options{Writes: unlimited})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := g.Admit(governor.Writes, governor.Normal); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAdmitRefused measures a refusal: a spent budget on a clock that
// stands still, from every goroutine at once.
func BenchmarkAdmitRefused(b *testing.B) {
	g := newGovernor(b, newClock(), governor.Options{Writes: governor.Limit{Rate: 1, Burst: 1}})
	spend(b, g, governor.Writes)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := g.Admit(governor.Writes, governor.Background); err == nil {
				b.Fatal("admitted on a spent budget")
			}
		}
	})
}

// BenchmarkGovernedFind measures the wrapper's cost on the admitted path:
// a governed Find over a Driver that answers at once, from every goroutine.
func BenchmarkGovernedFind(b *testing.B) {
	g := newGovernor(b, nil, governor.Options{Reads: unlimited})
	lbs := g.LoadBalancer(nopLBs{})
	q := loadbalancer.Query{Name: "a"}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := lbs.Find(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkObserve measures Observe of a successful call, the common case.
func BenchmarkObserve(b *testing.B) {
	g := newGovernor(b, nil, governor.Options{})
	b.ReportAllocs()
	for b.Loop() {
		g.Observe(governor.Reads, nil)
	}
}

// nopLBs is a loadbalancer.Driver that answers at once, so that
// BenchmarkGovernedFind measures the wrapper alone.
type nopLBs struct{}

func (nopLBs) Find(context.Context, loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	return nil, nil
}

func (nopLBs) Apply(context.Context, loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	return nil, nil
}

func (nopLBs) Delete(context.Context, *loadbalancer.LoadBalancer) error { return nil }
