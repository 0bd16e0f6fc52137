package routes

import (
	"fmt"
	"hash/maphash"
	"maps"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// partial is what a Diff decided: the Changes in the form its applier, the
// whole-table Table, writes it, and per Remove and per Desired route what
// became of it.
type partial struct {
	// removed are the indexes in Actual of the routes Remove named, in
	// ascending order.
	removed []int
	// rewritten holds, by index in Actual, the route that replaces an
	// actual route of the same name and cluster whose target, addresses
	// or blackhole state differ (Extra is the actual route's).
	rewritten map[int]Create
	// appended are the routes to add after the last one, in the order of
	// Desired.
	appended []Create
	// skipped are the desired routes with no node or an unparsable CIDR.
	skipped []Create
	// hit[i]: Remove[i] named at least one actual route.
	hit []bool
	// written[i]: the route Desired[i] asks for is in the table only if the
	// change is written (it is new or rewritten, or an earlier desired
	// route of this Diff wrote it).
	written []bool
	// conflict[i], when set, is the route that holds Desired[i]'s
	// destination under another name or cluster: Desired[i] is not created.
	conflict []*Entry
}

// changed reports whether the table changes.
func (c *partial) changed() bool {
	return len(c.removed) > 0 || len(c.rewritten) > 0 || len(c.appended) > 0
}

// plan returns c as a Changes: replaced and removed routes in Delete, in the
// order of Actual; replacements (in the order of Actual) and new routes in
// Create; routes not created, conflicts included, in Skipped.
func (c *partial) plan(in *DiffInput) Changes {
	var p Changes
	at := slices.Concat(c.removed, slices.Collect(maps.Keys(c.rewritten)))
	slices.Sort(at)
	for _, j := range at {
		p.Delete = append(p.Delete, in.Actual[j])
		if r, ok := c.rewritten[j]; ok {
			p.Create = append(p.Create, r)
		}
	}
	p.Create = append(p.Create, c.appended...)
	p.Skipped = c.skipped
	for di, e := range c.conflict {
		if e != nil {
			d := &in.Desired[di]
			p.Skipped = append(p.Skipped, in.create(d, d.CIDRs[0]))
		}
	}
	return p
}

// results sets results[i] for the calls of batch that fail on their own (a
// destination another route holds), without their method's prefix
// (batcher.settle adds it), and reports, per call, whether its success
// depends on the write: a delete that names a route, a create whose route
// is new or rewritten, or written by an earlier call.
func (c *partial) results(batch []*op, results []error) (dependent []bool) {
	dependent = make([]bool, len(batch))
	var creates, removes int
	for i, o := range batch {
		if !o.create {
			dependent[i] = c.hit[removes]
			removes++
			continue
		}
		if clash := c.conflict[creates]; clash != nil {
			results[i] = fmt.Errorf("route.DestinationCIDR %q for node %q: route %q of cluster %q -> node %q has the destination %q: expected a destination no other route has (the route controller deletes a stale route of its cluster in the same reconcile): %w",
				cut(o.entry.DestinationCIDR), cut(string(o.entry.TargetNode)), cut(clash.Name), cut(clash.Cluster), cut(string(clash.TargetNode)), cut(clash.DestinationCIDR), ErrCIDRInUse)
		}
		dependent[i] = c.written[creates]
		creates++
	}
	return dependent
}

// table returns the table to write: actual in its order, without the
// removed routes and with the rewritten ones in place, then the appended
// routes. Every entry gets its own TargetNodeAddresses; actual is not
// modified.
func (c *partial) table(actual []Entry) []Entry {
	next := make([]Entry, 0, len(actual)-len(c.removed)+len(c.appended))
	removed := c.removed
	for j, e := range actual {
		if len(removed) > 0 && removed[0] == j {
			removed = removed[1:]
			continue
		}
		if r, ok := c.rewritten[j]; ok {
			e = r.Entry
		}
		next = append(next, e.clone())
	}
	for _, a := range c.appended {
		next = append(next, a.Entry.clone())
	}
	return next
}

// wantedRoute is one desired route of a Diff, by the destination it
// takes.
type wantedRoute struct {
	d     int // index in Desired
	cidr  string
	group int // index of its destination among the distinct ones
}

// holderRef names a route that holds a destination during a Diff:
// j >= 0 is Actual[j], j < 0 the appended route -j-1.
type holderRef int

// diffPartial computes a Diff in three steps: index the change (the
// routes Remove names by target and CIDR, the desired routes by destination),
// read Actual once to find what Remove deletes and which routes hold a
// desired destination, then settle the desired routes in order.
func diffPartial(in *DiffInput) *partial {
	c := &partial{
		hit:      make([]bool, len(in.Remove)),
		written:  make([]bool, len(in.Desired)),
		conflict: make([]*Entry, len(in.Desired)),
	}
	seed := maphash.MakeSeed()
	removes := indexRemoves(in.Remove, seed)
	wanted, dests, byDest := c.indexWanted(in, seed)
	holders := make([][]holderRef, len(dests))

	for j := range in.Actual {
		e := &in.Actual[j]
		if len(in.Remove) > 0 && c.removes(in, removes, seed, e) {
			c.removed = append(c.removed, j)
			continue
		}
		if len(dests) == 0 {
			continue
		}
		if p, err := netip.ParsePrefix(e.DestinationCIDR); err == nil {
			if g := findDest(&byDest, dests, seed, p.Masked()); g >= 0 {
				holders[g] = append(holders[g], holderRef(j))
			}
		}
	}

	for _, w := range wanted {
		c.settle(in, w, holders)
	}
	return c
}

// routeKeyHash hashes what Remove matches by: the target and the CIDR string.
func routeKeyHash(seed maphash.Seed, node types.NodeName, cidr string) uint64 {
	return maphash.Comparable(seed, [2]string{string(node), cidr})
}

func indexRemoves(remove []Entry, seed maphash.Seed) *nodeIndex {
	var x nodeIndex
	x.reset(len(remove))
	for i := range remove {
		x.insert(routeKeyHash(seed, remove[i].TargetNode, remove[i].DestinationCIDR), int32(i))
	}
	return &x
}

// removes reports whether Remove names the actual route e (owned, same
// target and CIDR, and the same name unless the Remove entry has none),
// and marks every Remove entry that names it.
func (c *partial) removes(in *DiffInput, x *nodeIndex, seed maphash.Seed, e *Entry) bool {
	if !in.owns(e) {
		return false
	}
	h := routeKeyHash(seed, e.TargetNode, e.DestinationCIDR)
	found := false
	for cur := x.probe(h); cur.ok(); cur = cur.next() {
		if !cur.tagged(h) {
			continue
		}
		i := cur.slot()
		r := &in.Remove[i]
		if r.TargetNode == e.TargetNode && r.DestinationCIDR == e.DestinationCIDR && (r.Name == "" || r.Name == e.Name) {
			found = true
			c.hit[i] = true
		}
	}
	return found
}

// indexWanted lists the desired routes in order, skipping (into c.skipped)
// those with no node or an unparsable CIDR, and indexes their distinct
// destinations (masked prefixes).
func (c *partial) indexWanted(in *DiffInput, seed maphash.Seed) (wanted []wantedRoute, dests []netip.Prefix, byDest nodeIndex) {
	byDest.reset(len(in.Desired))
	for di := range in.Desired {
		d := &in.Desired[di]
		for _, cidr := range d.CIDRs {
			p, err := netip.ParsePrefix(cidr)
			if err != nil || d.Node == "" {
				c.skipped = append(c.skipped, in.create(d, cidr))
				continue
			}
			g := findDest(&byDest, dests, seed, p.Masked())
			if g < 0 {
				g = len(dests)
				dests = append(dests, p.Masked())
				byDest.insert(maphash.Comparable(seed, p.Masked()), int32(g)) //nolint:gosec // G115: 2^31 desired CIDRs would take >32 GiB; route tables hold thousands
			}
			wanted = append(wanted, wantedRoute{d: di, cidr: cidr, group: g})
		}
	}
	return wanted, dests, byDest
}

// findDest returns the index of p in dests, or -1.
func findDest(x *nodeIndex, dests []netip.Prefix, seed maphash.Seed, p netip.Prefix) int {
	h := maphash.Comparable(seed, p)
	for cur := x.probe(h); cur.ok(); cur = cur.next() {
		if cur.tagged(h) && dests[cur.slot()] == p {
			return int(cur.slot())
		}
	}
	return -1
}

// settle decides the desired route w against the routes that hold its
// destination now (actual ones Remove left, and those this Diff appended
// for earlier desired routes): another route there is a conflict; its own
// route (same name and cluster) stays if identical and is rewritten in
// place otherwise; with no route there, it is appended.
func (c *partial) settle(in *DiffInput, w wantedRoute, holders [][]holderRef) {
	want := in.create(&in.Desired[w.d], w.cidr)
	var (
		same         holderRef
		found, clash bool
		clashing     Entry
	)
	for _, h := range holders[w.group] {
		x := c.current(in, h)
		if x.Name == want.Entry.Name && x.Cluster == want.Entry.Cluster {
			same, found = h, true
		} else {
			clash, clashing = true, *x
		}
	}
	switch {
	case clash:
		c.conflict[w.d] = &clashing
	case found && identical(*c.current(in, same), want.Entry):
		// Written only if an earlier desired route of this Diff wrote it.
		_, rewritten := c.rewritten[int(same)]
		c.written[w.d] = c.written[w.d] || same < 0 || rewritten
	case found && same < 0:
		c.appended[-same-1] = want
		c.written[w.d] = true
	case found:
		want.Entry.Extra = in.Actual[same].Extra
		if c.rewritten == nil {
			c.rewritten = make(map[int]Create)
		}
		c.rewritten[int(same)] = want
		c.written[w.d] = true
	default:
		c.appended = append(c.appended, want)
		holders[w.group] = append(holders[w.group], holderRef(-len(c.appended)))
		c.written[w.d] = true
	}
}

// current returns the route h names as this Diff has left it so far.
func (c *partial) current(in *DiffInput, h holderRef) *Entry {
	if h < 0 {
		return &c.appended[-h-1].Entry
	}
	if r, ok := c.rewritten[int(h)]; ok {
		return &r.Entry
	}
	return &in.Actual[h]
}

// identical reports whether the stored entry a already is the route b
// creates: nothing to write.
func identical(a, b Entry) bool {
	return a.Name == b.Name && a.Cluster == b.Cluster && a.DestinationCIDR == b.DestinationCIDR &&
		a.TargetNode == b.TargetNode && !a.Blackhole && slices.Equal(a.TargetNodeAddresses, b.TargetNodeAddresses)
}
