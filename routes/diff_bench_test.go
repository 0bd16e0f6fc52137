package routes_test

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/routes"
)

// benchInput builds n dual-stack nodes and their routes; churn nodes are
// replaced (their routes are stale, new nodes have none). For every 100
// nodes the table also holds a route of another cluster.
func benchInput(n, churn int) routes.WholeInput {
	in := routes.WholeInput{
		Cluster:          cluster,
		ClusterCIDRs:     []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00:10:244::/48")},
		CompareAddresses: true,
	}
	node := func(i int) routes.NodeRoutes {
		return routes.NodeRoutes{
			Node:     types.NodeName(fmt.Sprintf("node-%d", i)),
			NameHint: fmt.Sprintf("00000000-0000-4000-8000-%012x", i),
			CIDRs:    []string{fmt.Sprintf("10.%d.%d.0/24", i/256, i%256), fmt.Sprintf("fd00:10:244:%x::/64", i)},
			Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: fmt.Sprintf("192.168.%d.%d", i/256, i%256)},
				{Type: v1.NodeInternalIP, Address: fmt.Sprintf("fd00::%x", i)},
			},
		}
	}
	for i := range n {
		d := node(i)
		if i >= churn {
			in.Desired = append(in.Desired, d)
		} else {
			in.Desired = append(in.Desired, node(n+i))
		}
		// The cloud's list does not share memory with the informer's nodes.
		for j, c := range d.CIDRs {
			in.Actual = append(in.Actual, routes.Entry{
				Name: fmt.Sprintf("r-%d-%d", i, j), Cluster: strings.Clone(cluster), TargetNode: types.NodeName(strings.Clone(string(d.Node))),
				DestinationCIDR: strings.Clone(c), TargetNodeAddresses: slices.Clone(d.Addresses),
			})
		}
		if i%100 == 0 {
			in.Actual = append(in.Actual, routes.Entry{Name: fmt.Sprintf("o-%d", i), Cluster: "other", TargetNode: "x", DestinationCIDR: fmt.Sprintf("10.%d.%d.0/24", 200+i/256, i%256)})
		}
	}
	return in
}

// coldBytes is how much input a benchmark rotates through: more than the
// last-level cache, so that every diffWhole starts with cold caches, as it does in
// a reconcile (which diffs a freshly listed table once per sync), at every
// size alike.
const coldBytes = 64 << 20

// BenchmarkDiffer measures diffWhole, the whole form of the differ, on 1k,
// 5k and 20k dual-stack nodes (2 routes each, one route in 201 another
// cluster's, TargetNodeAddresses compared), steady state and with 1% of
// the nodes replaced. Each iteration diffs the
// next of several identical inputs (about coldBytes in all, ~700 B per node),
// so no size runs from a warm cache. diffWhole should scale linearly:
// hack/diff-linearity.sh measures the 20k/5k time ratio in runs that
// alternate between the sizes, which a shared machine's drift skews less.
func BenchmarkDiffer(b *testing.B) {
	for _, n := range []int{1000, 5000, 20000} {
		for _, churn := range []struct {
			name string
			pct  int
		}{{"steady", 0}, {"churn1pct", 1}} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, churn.name), func(b *testing.B) {
				inputs := make([]routes.WholeInput, max(1, coldBytes/(n*700)))
				for i := range inputs {
					inputs[i] = benchInput(n, n*churn.pct/100)
				}
				want := 2 * n * churn.pct / 100
				runtime.GC() // start clean: no garbage of the previous sizes
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					p := routes.DiffWhole(inputs[i%len(inputs)])
					if len(p.Create) != want || len(p.Delete) != want {
						b.Fatalf("plan: %d creates, %d deletes, want %d each", len(p.Create), len(p.Delete), want)
					}
				}
			})
		}
	}
}

// BenchmarkInputScan is BenchmarkDiffer's baseline: it diffs nothing and
// only reads the fields diffWhole reads, of the same inputs, in two orders:
//
//   - once: every desired route, then every route of the table;
//   - like-diff: the desired routes' node names (as diffWhole indexes them), then
//     every route of the table, each followed by the desired route it
//     matches (as diffWhole confirms the match), so that a desired route's
//     NodeRoutes and name are read twice, the rest once.
//
// Its 20k/5k time ratio is how far from linear this machine's memory alone
// makes a pass over these tables.
func BenchmarkInputScan(b *testing.B) {
	for _, order := range []string{"once", "like-diff"} {
		for _, n := range []int{5000, 20000} {
			b.Run(fmt.Sprintf("order=%s/nodes=%d", order, n), func(b *testing.B) {
				inputs := make([]routes.WholeInput, max(1, coldBytes/(n*700)))
				for i := range inputs {
					inputs[i] = benchInput(n, 0)
				}
				twice := order == "like-diff"
				runtime.GC()
				b.ResetTimer()
				sum := 0
				for i := 0; b.Loop(); i++ {
					in := &inputs[i%len(inputs)]
					for di := range in.Desired {
						if d := &in.Desired[di]; twice {
							sum += lastByte(string(d.Node)) + len(d.CIDRs)
						} else {
							sum += touchDesired(d)
						}
					}
					for ai := range in.Actual {
						e := &in.Actual[ai]
						sum += len(e.Cluster) + len(e.TargetNode) + len(e.DestinationCIDR) + lastByte(e.Cluster) + lastByte(string(e.TargetNode)) + lastByte(e.DestinationCIDR)
						for _, a := range e.TargetNodeAddresses {
							sum += lastByte(a.Address)
						}
						// The table lists a node's two routes together, and
						// one of another cluster's every 100 nodes: 201
						// entries for 100 nodes.
						if di := ai * 100 / 201; twice && di < len(in.Desired) {
							sum += touchDesired(&in.Desired[di])
						}
					}
				}
				scanSink = sum
			})
		}
	}
}

var scanSink int

func touchDesired(d *routes.NodeRoutes) int {
	s := lastByte(string(d.Node))
	for _, c := range d.CIDRs {
		s += lastByte(c)
	}
	for _, a := range d.Addresses {
		s += lastByte(a.Address) + len(a.Type)
	}
	return s
}

func lastByte(s string) int {
	if s == "" {
		return 0
	}
	return int(s[len(s)-1])
}
