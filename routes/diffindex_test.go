package routes

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"runtime"
	"testing"
	"weak"

	"k8s.io/apimachinery/pkg/types"
)

// TestDesiredIndexCollisions checks desiredIndex against a linear search of
// the desired list, with real hashes and with hashes that collide: all equal
// (one probe sequence, one tag), equal buckets with distinct tags, and
// sequences that wrap around the end of the table.
func TestDesiredIndexCollisions(t *testing.T) {
	seed := maphash.MakeSeed()
	hashes := map[string]func(types.NodeName) uint64{
		"maphash":      func(n types.NodeName) uint64 { return maphash.String(seed, string(n)) },
		"all-equal":    func(types.NodeName) uint64 { return 0x1234_5678_0000_0007 },
		"same-bucket":  func(n types.NodeName) uint64 { return maphash.String(seed, string(n))<<32 | 7 },
		"last-bucket":  func(n types.NodeName) uint64 { return maphash.String(seed, string(n))<<32 | 0xffff_ffff },
		"two-per-node": func(n types.NodeName) uint64 { return uint64(len(n) % 2) },
	}
	r := rand.New(rand.NewPCG(1, 2))
	for name, hash := range hashes {
		t.Run(name, func(t *testing.T) {
			for round := range 200 {
				var desired []NodeRoutes
				cidrs := 0
				for range r.IntN(30) {
					d := NodeRoutes{Node: types.NodeName(fmt.Sprintf("n%d", r.IntN(12)))}
					for range r.IntN(4) {
						d.CIDRs = append(d.CIDRs, fmt.Sprintf("10.0.%d.0/24", r.IntN(6)))
					}
					cidrs += len(d.CIDRs)
					desired = append(desired, d)
				}
				x := getDesiredIndex(desired)
				for di := range desired {
					x.add(di, hash(desired[di].Node))
				}
				if len(x.state) != cidrs {
					t.Fatalf("round %d: %d states for %d CIDRs", round, len(x.state), cidrs)
				}
				// The oracle: the state index of each (node, cidr)'s first
				// listing; every later listing is not wanted on its own.
				first := map[[2]string]int{}
				var wantFirst [][2]string
				i := 0
				for _, d := range desired {
					for _, c := range d.CIDRs {
						k := [2]string{string(d.Node), c}
						if _, seen := first[k]; !seen {
							first[k] = i
							wantFirst = append(wantFirst, k)
						}
						i++
					}
				}
				var got [][2]string
				x.wanted(hash, func(d *NodeRoutes, c string) { got = append(got, [2]string{string(d.Node), c}) })
				if fmt.Sprint(got) != fmt.Sprint(wantFirst) {
					t.Fatalf("round %d: wanted reported\n%v\nwant the first listings\n%v", round, got, wantFirst)
				}
				for node := range 13 {
					for c := range 7 {
						n, cidr := types.NodeName(fmt.Sprintf("n%d", node)), fmt.Sprintf("10.0.%d.0/24", c)
						got, d := x.find(hash(n), n, cidr)
						want, listed := first[[2]string{string(n), cidr}]
						if !listed {
							want = -1
						}
						if got != want || (listed && d.Node != n) {
							t.Fatalf("round %d: find(%s, %s) = %d, want %d (the first listing)", round, n, cidr, got, want)
						}
					}
				}
				// A matched first listing is not reported; its later
				// listings still are not.
				for k, at := range first {
					if r.IntN(2) == 0 {
						x.state[at] = 0
						delete(first, k)
					}
				}
				got = got[:0]
				x.wanted(hash, func(d *NodeRoutes, c string) { got = append(got, [2]string{string(d.Node), c}) })
				if len(got) != len(first) {
					t.Fatalf("round %d: after matching, wanted reported %v, want the %d unmatched first listings", round, got, len(first))
				}
				for _, k := range got {
					if _, ok := first[k]; !ok {
						t.Fatalf("round %d: after matching, wanted reported %v, which was matched", round, k)
					}
				}
				x.put()
			}
		})
	}
}

// TestNodeIndexReset checks that a pooled table is sized for its input:
// never more than three quarters full, reused when close in size, and
// replaced when much too large (clearing it would cost its size).
func TestNodeIndexReset(t *testing.T) {
	var x nodeIndex
	for _, n := range []int{0, 1, 6, 7, 100, 20000, 19000, 10, 20000} {
		before := cap(x.tab)
		x.reset(n)
		size := len(x.tab)
		if size&(size-1) != 0 || size < 8 || 4*n > 3*size || (size > 8 && 4*n <= 3*size/2) {
			t.Errorf("reset(%d): %d entries, want the least power of two (at least 8) holding it three quarters full", n, size)
		}
		if x.mask != uint64(size-1) { //nolint:gosec // G115: size is at least 8, checked above
			t.Errorf("reset(%d): mask %#x for %d entries", n, x.mask, size)
		}
		for i, e := range x.tab {
			if e != (indexEntry{}) {
				t.Fatalf("reset(%d): entry %d not empty", n, i)
			}
		}
		if before > 4*size && cap(x.tab) > 4*size {
			t.Errorf("reset(%d): kept a table of %d for %d entries", n, before, size)
		}
		for i := range 3 * size / 4 {
			x.insert(uint64(i)*0x9e3779b97f4a7c15, int32(i))
		}
	}
}

// TestDiffReleasesInput checks that the pooled index does not keep the
// caller's desired routes alive once diffWhole has returned. One collection
// moves the pool's contents to its victim cache, which is still reachable,
// so the routes are collected only if the index let go of them.
func TestDiffReleasesInput(t *testing.T) {
	desired := make([]NodeRoutes, 1000)
	for i := range desired {
		desired[i] = NodeRoutes{Node: types.NodeName(fmt.Sprint("n", i)), CIDRs: []string{fmt.Sprintf("10.0.%d.0/24", i%250)}}
	}
	w := weak.Make(&desired[0])
	if p := diffWhole(wholeInput{Cluster: "c", Desired: desired}); len(p.Skipped) != 1000 {
		t.Fatalf("diffWhole without cluster CIDRs: %d skipped, want all 1000", len(p.Skipped))
	}
	desired = nil
	runtime.GC()
	if w.Value() != nil {
		t.Fatal("the desired routes given to diffWhole are still reachable after it returned")
	}
}

// TestResize checks that a pooled array is reused when close in size and
// let go of when much larger than needed.
func TestResize(t *testing.T) {
	small := make([]int32, 5, 2000)
	if got := resize(small, 500); len(got) != 0 || cap(got) != 2000 || &got[:1][0] != &small[0] {
		t.Errorf("resize(cap 2000, 500) = len %d cap %d, want the same array emptied", len(got), cap(got))
	}
	if got := resize(small, 5000); len(got) != 0 || cap(got) < 5000 {
		t.Errorf("resize(cap 2000, 5000) = len %d cap %d, want room for 5000", len(got), cap(got))
	}
	if got := resize(make([]int32, 0, 100000), 10); len(got) != 0 || cap(got) > 4*10+1024 {
		t.Errorf("resize(cap 100000, 10) = len %d cap %d, want a small array", len(got), cap(got))
	}
}
