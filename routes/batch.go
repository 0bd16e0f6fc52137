package routes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ccmkit/ccmkit/internal/throttle"
)

// op is one CreateRoute or DeleteRoute call waiting for, or in, a batch.
type op struct {
	ctx     context.Context
	create  bool
	cluster string
	hint    string // create: the nameHint
	entry   Entry  // create: the new entry; delete: the route as listed

	// Guarded by batcher.mu.
	state  opState
	leader bool          // designated to lead the next batch
	lead   chan struct{} // closed when designated leader
	done   chan struct{} // closed when err is final
	err    error
	// cause is err without the prefix of its method (see settle), for
	// ended to wrap: "routes: CreateRoute: " is said once.
	cause  error
	waited time.Duration // sum of the throttle delays its batches were retried after
	// ctxEnded: err is ended's, which already says what o was waiting for
	// when its ctx ended.
	ctxEnded bool
}

type opState int

const (
	queued opState = iota // in batcher.pending (again, after a throttled batch)
	taken                 // in a batch being applied
	done                  // err is set and done is closed
)

// batcher coalesces the calls of a whole-table Table. Invariants, under mu:
// pending is non-empty only while active; while active exactly one op (in
// pending, or running a batch) is the leader; only the leader takes ops off
// pending; a queued leader is pending[0].
type batcher struct {
	mu        sync.Mutex
	pending   []*op
	active    bool
	full      chan struct{} // closed when MaxBatch ops are pending during a window
	notBefore time.Time     // no batch starts before: the back-off of a throttled batch
	throttled error         // the driver error that set notBefore
}

// do queues o and returns its result: as the leader of a batch, or as a
// follower woken with the result, the leadership, or ctx's end.
func (b *batcher) do(ctx context.Context, t *Table, o *op) error {
	o.ctx = ctx
	if ctx.Err() != nil {
		return o.ended("before it joined a batch", nil)
	}
	o.lead = make(chan struct{})
	o.done = make(chan struct{})

	b.mu.Lock()
	b.pending = append(b.pending, o)
	first := !b.active
	if first {
		b.active, o.leader = true, true
	}
	if b.full != nil && len(b.pending) >= t.opts.MaxBatch {
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
		return b.abandon(o, waitTaken, nil)
	}
}

// What a call waits for when its ctx ends, for o.ended.
const (
	waitTaken  = "while it waited for a batch to take it (an earlier batch held the route table)"
	waitWindow = "before its batch started"
	waitBatch  = "while its batch read and wrote the route table (the change may still be applied)"
)

// abandon withdraws o, whose ctx is done, and returns o.ended: queuedWait
// and cause say what a queued o waited for and why. A queued o is removed
// (its leadership, if any, passes on), a taken o's result is discarded, a
// done o keeps its result.
func (b *batcher) abandon(o *op, queuedWait string, cause error) error {
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
		return o.ended(queuedWait, cause)
	}
	return o.ended(waitBatch, nil)
}

// ended returns the error of o, whose ctx has ended, when: the phrase
// saying what it was waiting for (or doing). It wraps ctx.Err(), so that
// errors.Is finds context.Canceled or context.DeadlineExceeded, and cause
// when not nil: the result its batch left it, which often names what held
// the batch up (a lock, a slow cloud).
func (o *op) ended(when string, cause error) error {
	err := fmt.Errorf("routes: %s: route %q %q -> node %q: %w %s", o.method(), cut(o.entry.Name), cut(o.entry.DestinationCIDR),
		cut(string(o.entry.TargetNode)), o.ctx.Err(), when)
	if cause != nil {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	o.ctxEnded = true
	return err
}

// method is the cloudprovider.Routes method o serves, which its errors
// start with.
func (o *op) method() string {
	if o.create {
		return "CreateRoute"
	}
	return "DeleteRoute"
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

// lead runs batches containing o until o's result is final, then hands
// the leadership on. After a throttled batch, o leads the retry while it is
// part of it; a leader whose ctx ends, waiting out the back-off or the
// window, passes the leadership to the next pending op (see abandon).
func (b *batcher) lead(t *Table, o *op, window bool) error {
	if window && t.opts.BatchWindow > 0 {
		b.mu.Lock()
		var full chan struct{}
		if len(b.pending) < t.opts.MaxBatch {
			full = make(chan struct{})
			b.full = full
		}
		b.mu.Unlock()
		if full != nil {
			timer := t.clock.NewTimer(t.opts.BatchWindow)
			select {
			case <-timer.C():
			case <-full:
			case <-o.ctx.Done():
			}
			timer.Stop()
		}
	}
	for {
		b.mu.Lock()
		wait, throttled := b.notBefore.Sub(t.clock.Now()), b.throttled
		b.mu.Unlock()
		if wait > 0 && throttle.Sleep(o.ctx, t.clock, wait) != nil {
			return b.abandon(o, fmt.Sprintf("while its batch waited %v for the cloud's throttle to end", wait.Round(time.Millisecond)), throttled)
		}
		batch, ok := b.take(t, o)
		if !ok {
			return b.abandon(o, waitWindow, nil)
		}
		res := t.runBatch(batch)

		b.mu.Lock()
		b.settle(t, batch, res)
		if o.state == done {
			b.handOff()
			b.mu.Unlock()
			break
		}
		b.mu.Unlock() // o is queued again, first, and leads the retry
	}
	if o.ctx.Err() != nil && !o.ctxEnded {
		return o.ended(waitBatch, o.cause)
	}
	return o.err
}

// take takes the next batch, at most MaxBatch live ops of o's cluster from
// the front of pending, for the leader o; it reports false, taking nothing,
// when o's ctx has ended. Ops whose ctx has ended are finished with their
// ctx's error. A batch is one Diff, whose creates belong to one
// cluster: calls of another cluster identity (a Table without
// Options.ClusterID called with several clusterNames) wait for a later batch.
func (b *batcher) take(t *Table, o *op) ([]*op, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if o.ctx.Err() != nil {
		return nil, false
	}
	b.full = nil
	var batch []*op
	keep := b.pending[:0]
	for _, p := range b.pending {
		switch {
		case len(batch) == t.opts.MaxBatch, p.cluster != o.cluster:
			keep = append(keep, p)
		case p.ctx.Err() != nil:
			p.finish(p.ended(waitTaken, nil), nil)
		default:
			p.state = taken
			batch = append(batch, p)
		}
	}
	clear(b.pending[len(keep):])
	b.pending = keep
	return batch, true
}

// settle finishes the ops of a batch with their results (res.errs, which
// settle prefixes with the op's method), or, for the ops a
// throttled driver call left undone, queues them again at the front of
// pending, in order, and makes the next batch wait res.after. An op whose
// ctx has ended, or that throttle.GiveUp says must not wait again, is finished
// instead. Called with mu held.
func (b *batcher) settle(t *Table, batch []*op, res batchResult) {
	var again []*op
	for i, p := range batch {
		cause := res.errs[i]
		switch {
		case res.retry[i] && p.ctx.Err() != nil:
			p.finish(p.ended("while its batch was throttled by the cloud ("+res.call+")", res.throttled), nil)
			continue
		case res.retry[i]:
			why := throttle.GiveUp(p.ctx, res.after, p.waited, t.opts.MaxThrottleWait)
			if why == "" {
				p.state, p.waited = queued, p.waited+res.after
				again = append(again, p)
				continue
			}
			cause = fmt.Errorf("%s: %s: %w", res.call, why, res.throttled)
		}
		var err error
		if cause != nil {
			err = fmt.Errorf("routes: %s: %w", p.method(), cause)
		}
		p.finish(err, cause)
	}
	if len(again) > 0 {
		b.pending = append(again, b.pending...)
		b.notBefore, b.throttled = t.clock.Now().Add(res.after), res.throttled
	}
}

// finish makes err o's final result; cause is err without its method's
// prefix. Called with batcher.mu held.
func (o *op) finish(err, cause error) {
	o.state, o.err, o.cause = done, err, cause
	close(o.done)
}

// batchResult is what one run of a batch did: each op's result, and after a
// throttled driver call, which ops it left undone and the delay it asks for.
type batchResult struct {
	errs      []error       // without the method's prefix (see settle)
	retry     []bool        // op i is undone: retry it after the delay
	throttled error         // the throttled driver error; nil if none
	call      string        // the driver call it came from
	after     time.Duration // its RetryAfter
}

// runBatch applies batch to the table with one read and at most one write
// (more after conflicts) and returns each op's result. A throttled read
// leaves every op undone, a throttled write every op whose success depends
// on it; runBatch does not wait (the leader does, see lead). Its driver
// calls run under a context that keeps the leader's values and is
// cancelled only when every op's ctx is done (batchContext).
func (t *Table) runBatch(batch []*op) batchResult {
	ctx, release := batchContext(batch)
	defer release()

	t.stats.batches.Add(1)
	t.stats.calls.Add(uint64(len(batch)))
	t.driverMu.Lock()
	defer t.driverMu.Unlock()
	r := batchRun{t: t, batch: batch, in: batchInput(batch, t.namer),
		res: batchResult{errs: make([]error, len(batch)), retry: make([]bool, len(batch))}}
	for attempt := 0; ; attempt++ {
		if !r.attempt(ctx, attempt < t.opts.ConflictRetries) {
			return r.res
		}
	}
}

// batchContext returns the context of a batch's driver calls: it keeps the
// values of the leader's ctx (batch[0]) and is cancelled only when every
// op's ctx is done, so that the calls still waiting get their result when
// others give up. release cancels it and stops watching the ops' contexts.
func batchContext(batch []*op) (ctx context.Context, release func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	var live atomic.Int64
	live.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, p := range batch {
		stops[i] = context.AfterFunc(p.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// batchRun is one run of a batch (Table.runBatch), with t.driverMu held:
// the batch as a DiffInput, and the results so far.
type batchRun struct {
	t     *Table
	batch []*op
	in    DiffInput
	res   batchResult
}

// attempt reads the table, computes the batch's change against it and
// writes it when it changes anything, setting r.res. It reports true only
// when the write conflicted (ErrConflict) and mayRetry: r.res is then to be
// computed again from a new read.
func (r *batchRun) attempt(ctx context.Context, mayRetry bool) (again bool) {
	clear(r.res.errs)
	entries, rev, err := r.t.table.ReadTable(ctx)
	if err != nil {
		r.readFailed(err)
		return false
	}
	r.in.Actual = entries
	ch := diffPartial(&r.in)
	dependent := ch.results(r.batch, r.res.errs)
	if !ch.changed() {
		return false
	}
	r.t.stats.writes.Add(1)
	err = r.t.table.WriteTable(ctx, rev, ch.table(entries))
	if err == nil {
		return false
	}
	if errors.Is(err, ErrConflict) {
		r.t.stats.conflicts.Add(1)
		if mayRetry {
			return true
		}
	}
	r.writeFailed(err, dependent)
	return false
}

// readFailed sets the result of every op after a failed read: undone,
// when the read was throttled; the error, wrapped, otherwise.
func (r *batchRun) readFailed(err error) {
	if r.throttled(err, "read route table") {
		for i := range r.res.retry {
			r.res.retry[i] = true
		}
		return
	}
	err = fmt.Errorf("read route table: %w", err)
	for i := range r.res.errs {
		r.res.errs[i] = err
	}
}

// writeFailed sets the result of each op whose success depends on the
// failed write (dependent) and that has no error of its own: the write's
// error, wrapped, and undone too when the write was throttled.
func (r *batchRun) writeFailed(err error, dependent []bool) {
	call := fmt.Sprintf("write route table (%d calls in the batch)", len(r.batch))
	retry := r.throttled(err, call)
	err = fmt.Errorf("%s: %w", call, err)
	for i := range r.res.errs {
		if r.res.errs[i] == nil && dependent[i] {
			r.res.errs[i], r.res.retry[i] = err, retry
		}
	}
}

// throttled reports whether err, from the driver call call, asks to retry
// after a delay (an api.RetryError, through internal/throttle); if so it
// counts it and records it in r.res.
func (r *batchRun) throttled(err error, call string) bool {
	d, ok := throttle.RetryAfter(err)
	if ok {
		r.t.stats.throttled.Add(1)
		r.res.throttled, r.res.call, r.res.after = err, call, d
	}
	return ok
}

// batchInput expresses a batch as the DiffInput of the table it reads:
// its creates are Desired (one route each, in call order), its deletes
// Remove. A batch's calls share one cluster (see batcher.take).
func batchInput(batch []*op, namer *Namer) DiffInput {
	in := DiffInput{Cluster: batch[0].cluster, Namer: namer}
	for _, o := range batch {
		if o.create {
			in.Desired = append(in.Desired, NodeRoutes{Node: o.entry.TargetNode, NameHint: o.hint,
				CIDRs: []string{o.entry.DestinationCIDR}, Addresses: o.entry.TargetNodeAddresses})
		} else {
			in.Remove = append(in.Remove, o.entry)
		}
	}
	return in
}
