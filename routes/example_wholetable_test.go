package routes_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/routes"
)

// memoryTable is a whole-table cloud: one route table, read and replaced as a
// whole, with a revision for conditional writes. The Table never calls it
// concurrently, so it needs no lock on the Table's behalf; the mutex guards
// against other users of the same table.
type memoryTable struct {
	mu      sync.Mutex
	entries []routes.Entry
	rev     int
}

func (m *memoryTable) ReadTable(ctx context.Context) ([]routes.Entry, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.entries), strconv.Itoa(m.rev), nil
}

func (m *memoryTable) WriteTable(ctx context.Context, revision string, entries []routes.Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if revision != strconv.Itoa(m.rev) {
		return fmt.Errorf("table is at revision %d: %w", m.rev, routes.ErrConflict)
	}
	m.entries, m.rev = entries, m.rev+1
	return nil
}

// The route controller creates a dual-stack node's two routes, and those of
// every other node, concurrently; a whole-table Table turns them into few
// table writes and keeps routes that are not the cluster's.
func ExampleNewWholeTable() {
	cloud := &memoryTable{entries: []routes.Entry{{Name: "internet", DestinationCIDR: "0.0.0.0/0"}}}
	table, err := routes.NewWholeTable(cloud, routes.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	nodes := []struct{ name, uid, v4, v6 string }{
		{"node-a", "0d4c5f1e-8f4a-4c49-9a39-2f1b5f8e6a01", "10.244.1.0/24", "fd00:10:244:1::/64"},
		{"node-b", "6a1f7f52-3b0e-4d2a-8c4b-0c9e1d2f3a02", "10.244.2.0/24", "fd00:10:244:2::/64"},
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		for _, cidr := range []string{n.v4, n.v6} {
			wg.Go(func() {
				r := &cloudprovider.Route{TargetNode: types.NodeName(n.name), DestinationCIDR: cidr}
				if err := table.CreateRoute(ctx, "kubernetes", n.uid, r); err != nil {
					fmt.Println("create:", err)
				}
			})
		}
	}
	wg.Wait()

	listed, err := table.ListRoutes(ctx, "kubernetes")
	if err != nil {
		panic(err)
	}
	slices.SortFunc(listed, func(a, b *cloudprovider.Route) int { return strings.Compare(a.DestinationCIDR, b.DestinationCIDR) })
	for _, r := range listed {
		fmt.Println(r.TargetNode, r.DestinationCIDR, "blackhole:", r.Blackhole)
	}
	st := table.Stats()
	fmt.Println("calls:", st.Calls, "writes <= batches:", st.Writes <= st.Batches)
	fmt.Println("table size with the internet route:", len(cloud.entries))

	// Output:
	// node-a 10.244.1.0/24 blackhole: false
	// node-b 10.244.2.0/24 blackhole: false
	// node-a fd00:10:244:1::/64 blackhole: false
	// node-b fd00:10:244:2::/64 blackhole: false
	// calls: 4 writes <= batches: true
	// table size with the internet route: 5
}
