package routes_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/routes"
)

// world is a random desired state and cloud table.
type world struct {
	in routes.WholeInput
}

var addrPool = addrs("192.168.0.1", "192.168.0.2", "fd00::1", "fd00::2")

func randAddrs(r *rand.Rand) []v1.NodeAddress {
	out := slices.Clone(addrPool)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:r.IntN(len(out)+1)]
}

func randomWorld(r *rand.Rand, namer *routes.Namer) world {
	in := routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, CompareAddresses: r.IntN(2) == 0, Namer: namer}
	nameSeq := 0
	entry := func(clusterName, node, cidr string, a []v1.NodeAddress) routes.Entry {
		nameSeq++
		return routes.Entry{Name: fmt.Sprintf("r%d", nameSeq), Cluster: clusterName, TargetNode: types.NodeName(node), DestinationCIDR: cidr, TargetNodeAddresses: slices.Clone(a)}
	}
	nodes := r.IntN(40)
	for i := range nodes {
		node := fmt.Sprintf("node-%d", i)
		d := routes.NodeRoutes{Node: types.NodeName(node), NameHint: fmt.Sprintf("uid-%d", i), Addresses: randAddrs(r)}
		switch r.IntN(4) {
		case 0:
			d.CIDRs = []string{fmt.Sprintf("10.244.%d.0/24", i)}
		case 1:
			d.CIDRs = []string{fmt.Sprintf("fd00:10:244:%x::/64", i)}
		default:
			d.CIDRs = []string{fmt.Sprintf("10.244.%d.0/24", i), fmt.Sprintf("fd00:10:244:%x::/64", i)}
		}
		if r.IntN(10) == 0 {
			d.CIDRs = append(d.CIDRs, fmt.Sprintf("172.16.%d.0/24", i)) // out of range
		}
		if r.IntN(10) == 0 {
			d.CIDRs = append(d.CIDRs, d.CIDRs[0]) // listed twice
		}
		in.Desired = append(in.Desired, d)
		if r.IntN(10) == 0 { // the node listed again, with one more CIDR
			again := d
			again.CIDRs = []string{d.CIDRs[0], fmt.Sprintf("10.244.%d.0/24", 100+i)}
			in.Desired = append(in.Desired, again)
			d.CIDRs = append(slices.Clone(d.CIDRs), again.CIDRs[1])
		}
		for _, cidr := range d.CIDRs {
			switch r.IntN(9) {
			case 0: // missing
			case 1:
				e := entry(cluster, node, cidr, d.Addresses)
				e.Blackhole = true
				in.Actual = append(in.Actual, e)
			case 2:
				in.Actual = append(in.Actual, entry(cluster, node, cidr, randAddrs(r)))
			case 3: // a distinct duplicate
				in.Actual = append(in.Actual, entry(cluster, node, cidr, d.Addresses), entry(cluster, node, cidr, d.Addresses))
			case 4: // the same route listed twice
				e := entry(cluster, node, cidr, d.Addresses)
				in.Actual = append(in.Actual, e, e)
			case 5: // routed to another node
				in.Actual = append(in.Actual, entry(cluster, fmt.Sprintf("node-%d", i+1000), cidr, nil))
			default:
				in.Actual = append(in.Actual, entry(cluster, node, cidr, d.Addresses))
			}
		}
	}
	for i := range r.IntN(15) {
		switch r.IntN(6) {
		case 0:
			in.Actual = append(in.Actual, entry("other", "node-x", fmt.Sprintf("10.244.%d.0/24", 200+i), nil))
		case 1:
			e := entry("", "", fmt.Sprintf("10.244.%d.0/24", 200+i), nil)
			e.Blackhole = true
			in.Actual = append(in.Actual, e)
		case 2:
			in.Actual = append(in.Actual, entry(cluster, "node-1", fmt.Sprintf("10.%d.0.0/24", 100+i), nil)) // out of range
		case 3:
			in.Actual = append(in.Actual, entry(cluster, "node-1", fmt.Sprintf("garbage-%d", i), nil))
		case 4:
			in.Actual = append(in.Actual, entry(cluster, fmt.Sprintf("gone-%d", i), fmt.Sprintf("fd00:10:244:%x::/64", 200+i), nil))
		default:
			in.Actual = append(in.Actual, entry(cluster, "", fmt.Sprintf("10.244.%d.0/24", 200+i), nil))
		}
	}
	r.Shuffle(len(in.Actual), func(i, j int) { in.Actual[i], in.Actual[j] = in.Actual[j], in.Actual[i] })
	return world{in}
}

// applyPlan deletes every entry equal to a planned delete, then appends the
// creates: what a Table does when the controller executes the plan.
func applyPlan(actual []routes.Entry, p routes.Changes) []routes.Entry {
	out := slices.DeleteFunc(slices.Clone(actual), func(e routes.Entry) bool {
		return slices.ContainsFunc(p.Delete, func(d routes.Entry) bool { return reflect.DeepEqual(d, e) })
	})
	for _, c := range p.Create {
		out = append(out, c.Entry)
	}
	return out
}

func inClusterRange(cidr string) bool {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return false
	}
	for _, c := range clusterCIDRs {
		if c.Contains(p.Masked().Addr()) {
			return true
		}
	}
	return false
}

type key struct {
	node types.NodeName
	cidr string
}

// Property: applying diffWhole's plan to the actual table yields the desired
// table within ownership (and leaves everything else alone), and a second
// diffWhole is empty.
func TestDiffProperty(t *testing.T) {
	namer, err := routes.NewNamer(routes.NamerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(500) {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		checkDiffConverges(t, fmt.Sprintf("seed %d", seed), randomWorld(r, namer).in)
	}
}

// checkDiffConverges checks the property on in, whose Owned must be nil,
// Cluster cluster and ClusterCIDRs clusterCIDRs.
func checkDiffConverges(t *testing.T, label string, in routes.WholeInput) {
	t.Helper()
	plan := routes.DiffWhole(in)
	after := applyPlan(in.Actual, plan)
	mine := func(e routes.Entry) bool { return e.Cluster == cluster && inClusterRange(e.DestinationCIDR) }

	// Everything outside ownership or range is untouched.
	var before, kept []routes.Entry
	for _, e := range in.Actual {
		if !mine(e) {
			before = append(before, e)
		}
	}
	for _, e := range after {
		if !mine(e) {
			kept = append(kept, e)
		}
	}
	if !reflect.DeepEqual(before, kept) {
		t.Fatalf("%s: routes outside ownership or range changed:\nbefore %+v\nafter  %+v", label, before, kept)
	}

	// Within ownership the table is the desired one: each (node, CIDR) at
	// its first listing, unless its node name is empty.
	wantKeys := map[key][]v1.NodeAddress{}
	for _, d := range in.Desired {
		for _, c := range d.CIDRs {
			if _, dup := wantKeys[key{d.Node, c}]; !dup && d.Node != "" && inClusterRange(c) {
				wantKeys[key{d.Node, c}] = d.Addresses
			}
		}
	}
	names := map[key]string{}
	for _, e := range after {
		if !mine(e) {
			continue
		}
		k := key{e.TargetNode, e.DestinationCIDR}
		a, ok := wantKeys[k]
		switch {
		case !ok:
			t.Fatalf("%s: undesired owned route left: %+v", label, e)
		case e.Blackhole:
			t.Fatalf("%s: blackhole route left: %+v", label, e)
		case in.CompareAddresses && !sameAddrSet(a, e.TargetNodeAddresses):
			t.Fatalf("%s: route %+v has addresses %v, want %v", label, e, e.TargetNodeAddresses, a)
		}
		if n, dup := names[k]; dup && n != e.Name {
			t.Fatalf("%s: two distinct routes for %v: %q and %q", label, k, n, e.Name)
		}
		names[k] = e.Name
	}
	if len(names) != len(wantKeys) {
		t.Fatalf("%s: %d desired (node, CIDR) pairs, %d routed", label, len(wantKeys), len(names))
	}

	// Converged: a second diff has nothing to do.
	in.Actual = after
	if again := routes.DiffWhole(in); !empty(again) {
		t.Fatalf("%s: second diffWhole not empty: %+v", label, again)
	}
}

// FuzzDiff checks the property of TestDiffProperty on tables the fuzzer
// builds from small pools of node names (the empty one too), CIDRs (in and
// out of range, another spelling, host bits set, not a CIDR), address sets
// and owners: desired listings, a node listed again, actual routes
// (blackhole or not) and a route listed twice.
func FuzzDiff(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0})
	f.Add([]byte{3, 0, 9, 3, 1, 9, 0x11, 2, 0, 0, 3, 1, 0x22, 1, 0x14, 2, 5})
	f.Add([]byte{0, 0, 1, 7, 1, 2, 4, 0x11, 3, 8, 0x25, 6, 0, 2, 0, 0, 3, 4, 2})
	nodes := []types.NodeName{"n0", "n1", "n2", "n3", "n4", ""}
	cidrs := []string{"10.244.1.0/24", "10.244.2.0/24", "10.244.1.1/24", "fd00:10:244:1::/64",
		"fd00:10:244:0001::/64", "10.9.0.0/16", "garbage", ""}
	addrSets := [][]v1.NodeAddress{nil, addrPool[:1], addrPool[:2], {addrPool[1], addrPool[0]}}
	owners := []string{cluster, "other", ""}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		in := routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, CompareAddresses: data[0]&1 != 0}
		if data[0]&2 != 0 {
			in.Namer = mustNamer(t, routes.NamerOptions{})
		}
		pick := func(b byte) []string { // one to three CIDRs, by the bits of b
			out := []string{cidrs[b%8]}
			if b&0x08 != 0 {
				out = append(out, cidrs[(b>>4)%8])
			}
			if b&0x80 != 0 {
				out = append(out, cidrs[(b>>1)%8])
			}
			return out
		}
		seq := 0
		for ops := data[1:]; len(ops) >= 3 && seq < 64; ops = ops[3:] {
			op, a, b := ops[0], ops[1], ops[2]
			seq++
			switch op % 4 {
			case 0: // a desired listing
				in.Desired = append(in.Desired, routes.NodeRoutes{Node: nodes[a%6], NameHint: fmt.Sprintf("uid-%d", a%6), CIDRs: pick(b), Addresses: addrSets[(a>>3)%4]})
			case 1: // an actual route
				in.Actual = append(in.Actual, routes.Entry{
					Name: fmt.Sprintf("r%d", seq), Cluster: owners[(op>>2)%3], TargetNode: nodes[a%6],
					DestinationCIDR: cidrs[b%8], TargetNodeAddresses: slices.Clone(addrSets[(b>>4)%4]), Blackhole: op&0x10 != 0,
				})
			case 2: // the last actual route listed again
				if len(in.Actual) > 0 {
					in.Actual = append(in.Actual, in.Actual[len(in.Actual)-1])
				}
			case 3: // the last desired node listed again, with other CIDRs
				if len(in.Desired) > 0 {
					d := in.Desired[len(in.Desired)-1]
					d.CIDRs, d.Addresses = pick(b), addrSets[a%4]
					in.Desired = append(in.Desired, d)
				}
			}
		}
		checkDiffConverges(t, fmt.Sprintf("input %x", data), in)
	})
}

func sameAddrSet(a, b []v1.NodeAddress) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// Property, end to end: executing diffWhole's plan through a Table (deletes, then
// creates, each phase concurrently like the route controller) converges the
// driver's table, on both kinds of driver.
func TestDiffThroughTableProperty(t *testing.T) {
	namer := mustNamer(t, routes.NamerOptions{})
	forEachBackend(t, func(t *testing.T, b backend) {
		for seed := range uint64(60) {
			w := randomWorld(rand.New(rand.NewPCG(seed, 0x7ab1e)), namer)
			tbl, stored, _ := b.make(t, routes.Options{EnableNodeAddresses: true}, slices.Clone(w.in.Actual)...)
			plan := routes.DiffWhole(w.in)
			var wg sync.WaitGroup
			errs := make([]error, len(plan.Delete)+len(plan.Create))
			for i, e := range plan.Delete {
				wg.Go(func() {
					errs[i] = tbl.DeleteRoute(t.Context(), cluster, &cloudprovider.Route{Name: e.Name, TargetNode: e.TargetNode, DestinationCIDR: e.DestinationCIDR})
				})
			}
			wg.Wait()
			for i, c := range plan.Create {
				wg.Go(func() {
					errs[len(plan.Delete)+i] = tbl.CreateRoute(t.Context(), cluster, c.NameHint, &cloudprovider.Route{
						TargetNode: c.Entry.TargetNode, DestinationCIDR: c.Entry.DestinationCIDR, TargetNodeAddresses: c.Entry.TargetNodeAddresses})
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("seed %d: executing the plan: %v", seed, err)
			}
			w.in.Actual = stored()
			if again := routes.DiffWhole(w.in); !empty(again) {
				t.Fatalf("seed %d: after executing the plan through the Table, diffWhole is not empty: %+v", seed, again)
			}
		}
	})
}

// diffWhole is safe for concurrent use (it pools its working memory): concurrent
// calls on different inputs give the sequential results.
func TestDiffConcurrent(t *testing.T) {
	namer := mustNamer(t, routes.NamerOptions{})
	worlds := make([]world, 16)
	want := make([]routes.Changes, len(worlds))
	for i := range worlds {
		worlds[i] = randomWorld(rand.New(rand.NewPCG(uint64(i), 0xc0c0)), namer)
		want[i] = routes.DiffWhole(worlds[i].in)
	}
	got := make([]routes.Changes, len(worlds))
	var wg sync.WaitGroup
	for i := range worlds {
		wg.Go(func() {
			for range 20 {
				got[i] = routes.DiffWhole(worlds[i].in)
			}
		})
	}
	wg.Wait()
	for i := range worlds {
		if !reflect.DeepEqual(want[i], got[i]) {
			t.Errorf("world %d: concurrent diffWhole differs from the sequential one:\nwant %+v\ngot  %+v", i, want[i], got[i])
		}
	}
}
