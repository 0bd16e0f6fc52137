package routes

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// stateWanted marks, in desiredIndex.state, a desired CIDR no actual route
// was matched to; a matched CIDR's state is the route's index in
// wholeInput.Actual.
const stateWanted = -1

// desiredIndex is diffWhole's view of wholeInput.Desired: every NodeRoutes
// in a slot, each desired CIDR with a state, and the slots found by node
// name through a hash index. diffWhole computes the hashes (so that a test
// can give colliding ones); the index compares names, so any hash is
// correct and a good one is fast.
//
// A (node, CIDR) listed more than once counts once, as its first listing:
// find returns that one, and wanted skips the others. Indexing reads only
// each NodeRoutes and its node name, not its CIDRs, so that the pass over
// the cloud's table is the first to read them (a second read of the
// desired routes is what costs most once they outgrow the CPU caches).
//
// Pooled: a periodic diffWhole of a large cluster reuses it rather than
// allocating (and collecting) it on every call.
type desiredIndex struct {
	desired []NodeRoutes
	slots   []diffSlot
	state   []int32 // per desired CIDR, in the order of desired
	index   nodeIndex
}

// diffSlot is one NodeRoutes of the desired list.
type diffSlot struct {
	d, at int32 // index in desired, offset in state
}

var desiredPool = sync.Pool{New: func() any { return new(desiredIndex) }}

// getDesiredIndex returns an empty index sized for desired; release it
// with put.
func getDesiredIndex(desired []NodeRoutes) *desiredIndex {
	x := desiredPool.Get().(*desiredIndex)
	x.desired = desired
	x.index.reset(len(desired))
	x.slots = resize(x.slots, len(desired))
	// Most nodes are single- or dual-stack; state grows if not.
	x.state = resize(x.state, 2*len(desired))
	return x
}

// resize returns s emptied, with room for n elements; like nodeIndex.reset
// it lets go of an array much larger than needed, so that one huge diffWhole
// does not keep its memory in the pool for every small one after it.
func resize[T any](s []T, n int) []T {
	if cap(s) > 4*n+1024 {
		return make([]T, 0, n)
	}
	return slices.Grow(s[:0], n)
}

func (x *desiredIndex) put() {
	x.desired = nil // do not keep the caller's input alive
	desiredPool.Put(x)
}

// add indexes desired[di], whose node name hashes to h; its CIDRs are
// wanted.
func (x *desiredIndex) add(di int, h uint64) {
	x.index.insert(h, int32(len(x.slots)))                                     //nolint:gosec // G115: 2^31 NodeRoutes would take >100 GiB; route tables hold thousands
	x.slots = append(x.slots, diffSlot{d: int32(di), at: int32(len(x.state))}) //nolint:gosec // G115: likewise, and 2^31 CIDRs >32 GiB
	for range x.desired[di].CIDRs {
		x.state = append(x.state, stateWanted)
	}
}

// find returns the state index of the first listing of (node, cidr), and
// its NodeRoutes, or -1 and nil; h is the hash of node.
//
// The first listing comes first on the probe sequence: a later slot of the
// same node (same hash) was inserted past every entry that was on the
// sequence before it, and entries are never removed.
func (x *desiredIndex) find(h uint64, node types.NodeName, cidr string) (int, *NodeRoutes) {
	for e := x.index.probe(h); e.ok(); e = e.next() {
		if !e.tagged(h) {
			continue
		}
		sl := x.slots[e.slot()]
		d := &x.desired[sl.d]
		if d.Node != node {
			continue
		}
		if j := slices.Index(d.CIDRs, cidr); j >= 0 {
			return int(sl.at) + j, d
		}
	}
	return -1, nil
}

// wanted calls f for each desired (node, CIDR) still wanted, at its first
// listing, in the order of desired; hash must be the hash add and find
// were given. Only the compact slots and state are read, and desired only
// for the CIDRs still wanted.
func (x *desiredIndex) wanted(hash func(types.NodeName) uint64, f func(d *NodeRoutes, cidr string)) {
	for si, sl := range x.slots {
		end := int32(len(x.state)) //nolint:gosec // G115: an offset in state, bounded as in add
		if si+1 < len(x.slots) {
			end = x.slots[si+1].at
		}
		for i := sl.at; i < end; i++ {
			if x.state[i] != stateWanted {
				continue
			}
			d := &x.desired[sl.d]
			cidr := d.CIDRs[i-sl.at]
			// A later listing is not wanted on its own: its first listing
			// is (or was matched).
			if first, _ := x.find(hash(d.Node), d.Node, cidr); first == int(i) {
				f(d, cidr)
			}
		}
	}
}

// nodeIndex is desiredIndex's hash index from node name to slots: an
// open-addressing table with linear probing, at most three quarters full.
// Each entry holds a slot number and the high 32 bits of the name's hash,
// so a probe reads a slot (and compares a name) almost only for the node it
// looks for; a node listed k times has k entries on one probe sequence.
//
// It replaced a Go map keyed by the name's hash: 8 bytes an entry is about
// a third of that map's memory, and there is no directory to walk. The
// index is looked up for every route of the cloud's table, at random, so
// its size decides how much of it stays in the CPU caches. (A 4-byte entry,
// slot and tag packed, was no faster: BENCHMARKS.md, "What changed".)
type nodeIndex struct {
	tab  []indexEntry // a power of two long
	mask uint64
}

type indexEntry struct {
	tag  uint32 // the high half of the name's hash
	slot int32  // slot number + 1; 0 marks an empty entry
}

// reset empties the index and sizes it for n entries, reusing its table
// unless that is too small or much too large (clearing it costs its size).
func (x *nodeIndex) reset(n int) {
	size := 8
	for size*3 < n*4 {
		size *= 2
	}
	if cap(x.tab) < size || cap(x.tab) > 4*size {
		x.tab = make([]indexEntry, size)
	} else {
		x.tab = x.tab[:size]
		clear(x.tab)
	}
	x.mask = uint64(size - 1) //nolint:gosec // G115: size is at least 8
}

// insert adds slot under hash h. reset sized the table so that it never
// fills up.
func (x *nodeIndex) insert(h uint64, slot int32) {
	i := h & x.mask
	for x.tab[i].slot != 0 {
		i = (i + 1) & x.mask
	}
	x.tab[i] = indexEntry{tag: uint32(h >> 32), slot: slot + 1}
}

// probe starts the probe sequence of hash h.
func (x *nodeIndex) probe(h uint64) indexCursor {
	return indexCursor{x: x, i: h & x.mask}
}

// indexCursor walks a probe sequence up to its first empty entry.
type indexCursor struct {
	x *nodeIndex
	i uint64
}

func (c indexCursor) ok() bool             { return c.x.tab[c.i].slot != 0 }
func (c indexCursor) next() indexCursor    { return indexCursor{x: c.x, i: (c.i + 1) & c.x.mask} }
func (c indexCursor) tagged(h uint64) bool { return c.x.tab[c.i].tag == uint32(h>>32) }
func (c indexCursor) slot() int32          { return c.x.tab[c.i].slot - 1 }
