package routes

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"

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
				x := getDesiredIndex(desired, cidrs)
				for di := range desired {
					x.add(di, hash(desired[di].Node))
				}
				// The oracle: the first listing of (node, cidr) is wanted,
				// every later one dup.
				seen := map[[2]string]bool{}
				i := 0
				for _, d := range desired {
					for _, c := range d.CIDRs {
						k := [2]string{string(d.Node), c}
						want := int32(stateWanted)
						if seen[k] {
							want = stateDup
						}
						seen[k] = true
						if x.state[i] != want {
							t.Fatalf("round %d: state of %v (CIDR #%d) = %d, want %d", round, k, i, x.state[i], want)
						}
						i++
					}
				}
				for node := range 13 {
					for c := range 7 {
						n, cidr := types.NodeName(fmt.Sprintf("n%d", node)), fmt.Sprintf("10.0.%d.0/24", c)
						got, d := x.find(hash(n), n, cidr)
						if !seen[[2]string{string(n), cidr}] {
							if got != -1 || d != nil {
								t.Fatalf("round %d: find(%s, %s) = %d, want -1", round, n, cidr, got)
							}
							continue
						}
						if got < 0 || x.state[got] == stateDup || d.Node != n {
							t.Fatalf("round %d: find(%s, %s) = %d (%v), want the first listing", round, n, cidr, got, d)
						}
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
		if x.mask != uint64(size-1) {
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
