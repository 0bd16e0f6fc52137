package routes_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/routes"
)

// BenchmarkTableBatch measures one whole-table batch: 200 concurrent
// CreateRoute calls (the route controller's maxConcurrentRouteOperations)
// against a table of 5,000 or 20,000 routes, coalesced into one ReadTable
// and one WriteTable. Each iteration starts from the same table; the window
// is long and MaxBatch 200, so the batch starts when the 200th call joins
// and never waits for a timer.
func BenchmarkTableBatch(b *testing.B) {
	const calls = 200
	for _, n := range []int{5000, 20000} {
		b.Run(fmt.Sprintf("routes=%d/creates=%d", n, calls), func(b *testing.B) {
			seed := make([]routes.Entry, n)
			for i := range seed {
				seed[i] = routes.Entry{Name: fmt.Sprintf("r-%d", i), Cluster: cluster, TargetNode: "node-old",
					DestinationCIDR: fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)}
			}
			hints := make([]string, calls)
			rs := make([]*cloudprovider.Route, calls)
			for i := range rs {
				hints[i] = fmt.Sprintf("00000000-0000-4000-8000-%012x", i)
				rs[i] = &cloudprovider.Route{TargetNode: "node-new", DestinationCIDR: fmt.Sprintf("10.%d.%d.0/24", 200+i/256, i%256)}
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				d := &memTable{entries: seed}
				tbl, err := routes.NewWholeTable(d, routes.Options{BatchWindow: time.Hour, MaxBatch: calls})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				var wg sync.WaitGroup
				for i := range rs {
					wg.Go(func() {
						if err := tbl.CreateRoute(b.Context(), cluster, hints[i], rs[i]); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				if s := tbl.Stats(); s.Writes != 1 {
					b.Fatalf("%d writes, want 1 batch", s.Writes)
				}
			}
		})
	}
}
