package fake

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/routes"
)

// naiveOverlap is the route table's overlap rule the slow way: whether two
// cluster routes of entries have overlapping destinations.
func naiveOverlap(entries []routes.Entry) bool {
	for i, a := range entries {
		for _, b := range entries[:i] {
			if a.Cluster != "" && b.Cluster != "" &&
				netip.MustParsePrefix(a.DestinationCIDR).Overlaps(netip.MustParsePrefix(b.DestinationCIDR)) {
				return true
			}
		}
	}
	return false
}

// indexState is what a routeIndex holds, for comparing an index kept up
// to date change by change with one built from scratch.
type indexState struct {
	Keys   []routeKey
	Dests  map[netip.Prefix]routeKey
	Inside map[netip.Prefix]int
}

func stateOf(x *routeIndex) indexState {
	st := indexState{Dests: map[netip.Prefix]routeKey{}, Inside: x.inside}
	for k := range x.byKey {
		st.Keys = append(st.Keys, k)
	}
	slices.SortFunc(st.Keys, func(a, b routeKey) int {
		return cmp.Or(cmp.Compare(a.cluster, b.cluster), cmp.Compare(a.name, b.name))
	})
	for p, r := range x.dests {
		st.Dests[p] = keyOf(&r.Entry)
	}
	return st
}

// TestRouteIndexIncremental: over random changes of a table (routes
// added, removed, retargeted and moved, of two clusters and of none, with
// nested destinations), replace accepts exactly the tables without overlapping
// cluster routes, and the index it keeps change by change, rolled back
// after each refusal, is the index built from scratch for the table.
func TestRouteIndexIncremental(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randomRoute := func(n int) routes.Entry {
		bits := 8 + rng.IntN(17)                                                        // /8 … /24 inside 10.0.0.0/8: often nested
		a := netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(4) * 64), 0}) //nolint:gosec // G115: at most 3 and 192
		return routes.Entry{
			Cluster:         []string{"", "a", "b"}[rng.IntN(3)],
			Name:            fmt.Sprintf("r%d", n),
			DestinationCIDR: netip.PrefixFrom(a, bits).Masked().String(),
			TargetNode:      "node",
		}
	}
	x := newRouteIndex()
	var table []routes.Entry
	accepted, refused := 0, 0
	for step := range 300 {
		// Each step removes, changes and adds routes at random, so that
		// a refused table also had routes removed and changed.
		next := slices.Clone(table)
		if len(next) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(next))
			next = slices.Delete(next, i, i+1)
		}
		if len(next) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(next))
			next[i].TargetNode = "other-node"
			if rng.IntN(2) == 0 {
				next[i].DestinationCIDR = randomRoute(0).DestinationCIDR
			}
			if rng.IntN(2) == 0 {
				next[i].Extra = nil // as a driver that dropped it
			}
		}
		for range rng.IntN(3) {
			next = append(next, randomRoute(step*10+rng.IntN(10)))
		}
		dupName := false
		seen := map[routeKey]bool{}
		for i := range next {
			dupName = dupName || seen[keyOf(&next[i])]
			seen[keyOf(&next[i])] = true
		}
		err := x.replace(table, next, tablePath)
		if want := !naiveOverlap(next) && !dupName; (err == nil) != want {
			t.Fatalf("step %d: replace = %v; want accepted %v for %v", step, err, want, next)
		}
		if err == nil {
			table = next
			accepted++
		} else {
			refused++
		}
		fresh := newRouteIndex()
		if err := fresh.replace(nil, slices.Clone(table), tablePath); err != nil {
			t.Fatalf("step %d: the accepted table fails from scratch: %v", step, err)
		}
		if diff := gocmp.Diff(stateOf(fresh), stateOf(x), gocmp.AllowUnexported(routeKey{})); diff != "" {
			t.Fatalf("step %d (error %v): the kept index differs from one built from scratch (-scratch +kept):\n%s", step, err, diff)
		}
	}
	if accepted < 100 || refused < 100 {
		t.Errorf("%d tables accepted, %d refused; want many of each for the test to mean something", accepted, refused)
	}
}
