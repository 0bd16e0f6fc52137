package routes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// op is one CreateRoute or DeleteRoute call waiting for, or in, a batch.
type op struct {
	ctx     context.Context
	create  bool
	cluster string
	entry   Entry        // create: the new entry; delete: the route as listed
	prefix  netip.Prefix // masked destination; invalid if it does not parse

	// Guarded by batcher.mu.
	state  opState
	leader bool          // designated to lead the next batch
	lead   chan struct{} // closed when designated leader
	done   chan struct{} // closed when err is final
	err    error
}

type opState int

const (
	queued opState = iota // in batcher.pending
	taken                 // in a batch being applied
	done                  // err is set and done is closed
)

// batcher coalesces the calls of a whole-table Table. Invariants, under mu:
// pending is non-empty only while active; while active exactly one op (in
// pending, or running a batch) is the leader; only the leader takes ops off
// pending.
type batcher struct {
	mu      sync.Mutex
	pending []*op
	active  bool
	full    chan struct{} // closed when MaxBatch ops are pending during a window
}

// do queues o and returns its result: as the leader of a batch, or as a
// follower woken with the result, the leadership, or ctx's end.
func (b *batcher) do(ctx context.Context, t *Table, o *op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o.ctx = ctx
	o.lead = make(chan struct{})
	o.done = make(chan struct{})

	b.mu.Lock()
	b.pending = append(b.pending, o)
	first := !b.active
	if first {
		b.active, o.leader = true, true
	}
	if b.full != nil && len(b.pending) >= t.cfg.MaxBatch {
		close(b.full)
		b.full = nil
	}
	b.mu.Unlock()

	if first {
		return b.lead(t, o, true)
	}
	select {
	case <-o.done:
		return o.err
	case <-o.lead:
		// Calls queued while the previous batch was written: no window.
		return b.lead(t, o, false)
	case <-ctx.Done():
		return b.abandon(o)
	}
}

// abandon withdraws o, whose ctx is done, and returns ctx.Err(); a queued o
// is removed (its leadership, if any, passes on), a taken o's result is
// discarded, a done o keeps its result.
func (b *batcher) abandon(o *op) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch o.state {
	case done:
		return o.err
	case queued:
		b.pending = slices.DeleteFunc(b.pending, func(p *op) bool { return p == o })
		if o.leader {
			b.handOff()
		}
	}
	return o.ctx.Err()
}

// handOff passes the leadership to the first pending op, or ends it.
// Called with mu held.
func (b *batcher) handOff() {
	b.full = nil
	if len(b.pending) == 0 {
		b.active = false
		return
	}
	next := b.pending[0]
	next.leader = true
	close(next.lead)
}

// lead runs one batch containing o, then hands the leadership on.
func (b *batcher) lead(t *Table, o *op, window bool) error {
	if window && t.cfg.BatchWindow > 0 {
		b.mu.Lock()
		var full chan struct{}
		if len(b.pending) < t.cfg.MaxBatch {
			full = make(chan struct{})
			b.full = full
		}
		b.mu.Unlock()
		if full != nil {
			timer := time.NewTimer(t.cfg.BatchWindow)
			select {
			case <-timer.C:
			case <-full:
			case <-o.ctx.Done():
			}
			timer.Stop()
		}
	}

	b.mu.Lock()
	if o.ctx.Err() != nil {
		b.mu.Unlock()
		return b.abandon(o)
	}
	b.full = nil
	var batch []*op
	keep := b.pending[:0]
	for _, p := range b.pending {
		switch {
		case len(batch) == t.cfg.MaxBatch:
			keep = append(keep, p)
		case p.ctx.Err() != nil:
			p.state, p.err = done, p.ctx.Err()
			close(p.done)
		default:
			p.state = taken
			batch = append(batch, p)
		}
	}
	clear(b.pending[len(keep):])
	b.pending = keep
	b.mu.Unlock()

	results := t.runBatch(batch)

	b.mu.Lock()
	for i, p := range batch {
		p.state, p.err = done, results[i]
		close(p.done)
	}
	b.handOff()
	b.mu.Unlock()

	if err := o.ctx.Err(); err != nil {
		return err
	}
	return o.err
}

// runBatch applies batch to the table with one read and at most one write
// (more after conflicts) and returns each op's result. Its driver calls run
// under a context that keeps the leader's values and is cancelled only when
// every op's ctx is done.
func (t *Table) runBatch(batch []*op) []error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	defer cancel()
	live := atomic.Int64{}
	live.Store(int64(len(batch)))
	for _, p := range batch {
		stop := context.AfterFunc(p.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}

	t.stats.batches.Add(1)
	t.stats.calls.Add(uint64(len(batch)))
	t.driverMu.Lock()
	defer t.driverMu.Unlock()
	results := make([]error, len(batch))
	for attempt := 0; ; attempt++ {
		entries, rev, err := t.table.ReadTable(ctx)
		if err != nil {
			err = fmt.Errorf("routes: read route table: %w", err)
			for i := range results {
				results[i] = err
			}
			return results
		}
		next, dependent, changed := apply(entries, batch, results)
		if !changed {
			return results
		}
		t.stats.writes.Add(1)
		err = t.table.WriteTable(ctx, rev, next)
		if err == nil {
			return results
		}
		if errors.Is(err, ErrConflict) {
			t.stats.conflicts.Add(1)
			if attempt < t.cfg.ConflictRetries {
				continue
			}
		}
		err = fmt.Errorf("routes: write route table (%d calls in the batch): %w", len(batch), err)
		for i := range results {
			if results[i] == nil && dependent[i] {
				results[i] = err
			}
		}
		return results
	}
}

// apply applies the batch to a copy of entries, deletes first, then creates,
// in call order. It sets results[i] for calls that fail on their own (a
// destination in use), and reports per call whether its success depends on
// the write (it changed the table or relied on a change of this batch), and
// whether anything changed. entries is not modified.
func apply(entries []Entry, batch []*op, results []error) (next []Entry, dependent []bool, changed bool) {
	orig := len(entries)
	next = make([]Entry, 0, orig+len(batch))
	for _, e := range entries {
		next = append(next, e.clone())
	}
	removed := make([]bool, orig, orig+len(batch))
	touched := make([]bool, orig, orig+len(batch))
	byName := make(map[string][]int, orig)
	byPrefix := make(map[netip.Prefix][]int, orig)
	index := func(i int) {
		byName[next[i].Name] = append(byName[next[i].Name], i)
		if p, err := netip.ParsePrefix(next[i].DestinationCIDR); err == nil {
			m := p.Masked()
			byPrefix[m] = append(byPrefix[m], i)
		}
	}
	for i := range next {
		index(i)
	}
	dependent = make([]bool, len(batch))

	for i, o := range batch {
		if o.create {
			continue
		}
		var cands []int
		switch {
		case o.entry.Name != "":
			cands = byName[o.entry.Name]
		case o.prefix.IsValid():
			cands = byPrefix[o.prefix]
		default:
			cands = make([]int, len(next))
			for j := range cands {
				cands[j] = j
			}
		}
		for _, j := range cands {
			if !matchesListed(next[j], o.entry) {
				continue
			}
			dependent[i] = true // a removal now, or one by an earlier call
			if !removed[j] {
				removed[j], changed = true, true
			}
		}
	}

	for i, o := range batch {
		if !o.create {
			continue
		}
		same := -1
		var clash *Entry
		for _, j := range byPrefix[o.prefix] {
			switch {
			case removed[j]:
			case next[j].Name == o.entry.Name && next[j].Cluster == o.entry.Cluster:
				same = j
			default:
				clash = &next[j]
			}
		}
		switch {
		case clash != nil:
			results[i] = fmt.Errorf("routes: create route %q %s -> node %q: destination held by route %q of cluster %q -> node %q: %w",
				o.entry.Name, o.entry.DestinationCIDR, o.entry.TargetNode, clash.Name, clash.Cluster, clash.TargetNode, ErrCIDRInUse)
		case same >= 0 && identical(next[same], o.entry):
			// Entries this batch appended are touched too.
			dependent[i] = touched[same]
		case same >= 0:
			extra := next[same].Extra
			next[same] = o.entry.clone()
			next[same].Extra = extra
			touched[same], dependent[i], changed = true, true, true
		default:
			next = append(next, o.entry.clone())
			removed = append(removed, false)
			touched = append(touched, true)
			index(len(next) - 1)
			dependent[i], changed = true, true
		}
	}

	if changed {
		out := next[:0]
		for j, e := range next {
			if !removed[j] {
				out = append(out, e)
			}
		}
		next = out
	}
	return next, dependent, changed
}

// identical reports whether the stored entry a already is the route b
// creates: nothing to write.
func identical(a, b Entry) bool {
	return a.Name == b.Name && a.Cluster == b.Cluster && a.DestinationCIDR == b.DestinationCIDR &&
		a.TargetNode == b.TargetNode && !a.Blackhole && slices.Equal(a.TargetNodeAddresses, b.TargetNodeAddresses)
}
