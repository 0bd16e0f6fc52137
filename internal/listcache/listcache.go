// Package listcache holds ccmkit's one list cache: the value of one list
// call on the cloud, kept for a TTL measured from the moment that call
// started, with at most one call running at a time (single flight), a
// failed call remembered for an ErrorTTL, and a throttled call's back-off
// honoured. instances.Cache, loadbalancer.Cache and the ListTTL of a
// routes.Table keep their lists in it; what a list holds and how it is
// read stays with them, except the one check every list needs: that it
// holds each ID once (IDsOnce, built on Repeats and Inconsistent, the
// ErrInconsistent error of a list that does not).
//
// It is internal: users see only what each of those blocks documents.
package listcache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/internal/throttle"
)

// Options configures a List. TTL is required; every other field's zero
// value is a default.
type Options struct {
	// TTL is how long one successful list serves Get and Fresh, measured
	// from the moment that list started. Required: positive.
	TTL time.Duration
	// ErrorTTL is how long a failed list is remembered: Get returns its
	// error in that period without listing again. 0 or negative means
	// none. A list that failed while its caller's context had ended is
	// never remembered; a throttled one (see List) always is.
	ErrorTTL time.Duration
	// Clock is read, with the lock held, for the start of each list and
	// for every freshness check; nil means clock.RealClock{}. It must be
	// safe for concurrent use and must not call the List.
	Clock clock.PassiveClock
	// Locker is the lock that guards the List. Give the lock of the
	// caller's own state to read and change the kept value in place, and
	// to keep state beside it that a Run's Done updates atomically with
	// the List (Kept and Run.Done are called with it held). Nil means a
	// lock of the List's own.
	Locker sync.Locker
	// Generation is the generation the List belongs to: Invalidate on it
	// invalidates every List that shares it. Nil means one of the List's
	// own.
	Generation *Generation
	// Err returns the error Get gives for a list that failed with err
	// (for example err wrapped with what was listed); nil means err
	// itself. It is called without the lock. The throttle back-off is read
	// from err, before Err, so Err may drop what err wraps.
	Err func(err error) error
	// Name names the list in the error of a list that panicked:
	// "<Name> panicked: <value>".
	Name string
}

// List is the single-flight TTL cache of one list's value V.
//
// Get returns the kept value while it is fresh (younger than TTL, counted
// from the start of its list, and no Invalidate since that list started);
// otherwise it runs one list on its own goroutine, or joins the one
// running, and shares its outcome. Exactly one list runs at a time, except
// that a list running when Invalidate is called no longer counts: its
// outcome answers the Get calls that joined it but is not kept, and the
// next Get starts a new one. A joiner whose context ends stops waiting with
// ctx.Err(); when a list fails while the context of the Get that ran it
// has ended, its joiners with live contexts list again.
//
// Failures: a failed list is remembered for ErrorTTL. A throttled list
// (its error wraps an *api.RetryError with a positive RetryAfter D, read
// with internal/throttle) is remembered for max(ErrorTTL, D) whatever the
// generation, the context or ErrorTTL, and across Invalidate: in that
// window Get lists nothing and returns an error that wraps the list's and
// whose first *api.RetryError has RetryAfter equal to the time left.
//
// A List starts no goroutine and is safe for concurrent use. Create it
// with New; the zero value is not usable.
type List[V any] struct {
	ttl      time.Duration
	errorTTL time.Duration
	clock    clock.PassiveClock
	mu       sync.Locker
	gen      *Generation
	errOf    func(error) error
	name     string

	// Guarded by mu.
	kept      V
	has       bool       // kept is set
	keptAt    Stamp      // the start of kept's list
	flight    *flight[V] // the list running, or nil
	failErr   error      // the last failed list, remembered until failUntil
	failUntil time.Time
	failGen   uint64 // the generation failErr was remembered in
	throttled bool   // failErr was throttled: Get gives a RetryError, Invalidate keeps it
}

// New returns a List configured by o. It starts nothing.
func New[V any](o Options) *List[V] {
	l := &List[V]{ttl: o.TTL, errorTTL: o.ErrorTTL, clock: o.Clock, mu: o.Locker, gen: o.Generation, errOf: o.Err, name: o.Name}
	if l.clock == nil {
		l.clock = clock.RealClock{}
	}
	if l.mu == nil {
		l.mu = new(sync.Mutex)
	}
	if l.gen == nil {
		l.gen = new(Generation)
	}
	return l
}

// Generation counts invalidations of the Lists that share it. The zero
// value is usable; it is safe for concurrent use and never takes a List's
// lock, so Invalidate may be called with one held.
type Generation struct{ n atomic.Uint64 }

// Invalidate drops the value of every List of g, and the failures they
// remember unless throttled; a list running now is not kept.
func (g *Generation) Invalidate() { g.n.Add(1) }

// Stamp returns the Stamp of a list that starts at time at.
func (g *Generation) Stamp(at time.Time) Stamp { return Stamp{at: at, gen: g.n.Load()} }

// Stamp marks when a list started and in which generation: its value
// serves until at+TTL, and only while no Invalidate came since.
type Stamp struct {
	at  time.Time
	gen uint64
}

// Origin is where Get found its value.
type Origin int

const (
	// Cached: the kept value, or the remembered failure; no list was run
	// or waited for.
	Cached Origin = iota
	// Joined: the outcome of a list another Get started.
	Joined
	// Listed: the outcome of a list this Get ran.
	Listed
)

// Run is one list, as the begin function of Get returns it.
type Run[V any] struct {
	// List lists, without the lock held, on the goroutine of the Get that
	// started it. Required.
	List func(ctx context.Context) (V, error)
	// Done, if not nil, is called with the lock held once List has
	// returned (or panicked: err is then the panic's), before the outcome
	// is kept and shared; err is what Get returns. When err is nil, its
	// result replaces v: a caller lays over v what it learnt while List
	// ran.
	Done func(v V, err error) V
}

// flight is one list in progress; done is closed when v or err is set.
type flight[V any] struct {
	done     chan struct{}
	run      Run[V]
	stamp    Stamp
	v        V
	err      error
	canceled bool // the list failed and its caller's context had ended
}

// Get returns a fresh value, running or joining the one list, and where
// it came from. When it must list, it calls begin with the lock held and
// runs the Run it returns. The error of a failed list is Options.Err's,
// with a throttle's RetryError restored; a joiner whose ctx ends gets
// ctx.Err() unwrapped.
func (l *List[V]) Get(ctx context.Context, begin func() Run[V]) (V, Origin, error) {
	var zero V
	for {
		l.mu.Lock()
		now := l.clock.Now()
		gen := l.gen.n.Load()
		if l.fresh(now, gen) {
			v := l.kept
			l.mu.Unlock()
			return v, Cached, nil
		}
		if err := l.failure(now, gen); err != nil {
			l.mu.Unlock()
			return zero, Cached, err
		}
		if f := l.flight; f != nil && f.stamp.gen == gen {
			l.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return zero, Joined, ctx.Err()
			}
			if f.canceled && ctx.Err() == nil {
				continue // the Get that listed gave up; list again
			}
			return f.v, Joined, f.err
		}
		f := &flight[V]{done: make(chan struct{}), run: begin(), stamp: Stamp{at: now, gen: gen}}
		l.flight = f
		l.mu.Unlock()
		v, err := l.list(ctx, f)
		return v, Listed, err
	}
}

// fresh reports whether the kept value serves at now in generation gen
// (l.mu held).
func (l *List[V]) fresh(now time.Time, gen uint64) bool {
	return l.has && l.keptAt.gen == gen && now.Before(l.keptAt.at.Add(l.ttl))
}

// failure returns the remembered failure that answers at now in
// generation gen, or nil (l.mu held).
func (l *List[V]) failure(now time.Time, gen uint64) error {
	if l.failErr == nil || !now.Before(l.failUntil) || (!l.throttled && l.failGen != gen) {
		return nil
	}
	if l.throttled {
		return throttle.Delay(l.failErr, l.failUntil.Sub(now))
	}
	return l.failErr
}

// list runs flight f and publishes its outcome to f's joiners and the
// List.
func (l *List[V]) list(ctx context.Context, f *flight[V]) (v V, err error) {
	var backoff time.Duration // positive when the list was throttled
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v", l.name, r)
			defer panic(r)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.flight == f {
			l.flight = nil
		}
		if backoff > 0 {
			err = throttle.Delay(err, backoff)
		}
		if f.run.Done != nil {
			if out := f.run.Done(v, err); err == nil {
				v = out
			}
		}
		l.settle(ctx, f, v, err, backoff)
		f.v, f.err = v, err
		close(f.done)
	}()
	v, err = f.run.List(ctx)
	if err != nil {
		if d, ok := throttle.RetryAfter(err); ok && d > 0 {
			backoff = d
		}
		var zero V
		if l.errOf != nil {
			err = l.errOf(err)
		}
		return zero, err
	}
	return v, nil
}

// settle records the outcome of flight f in the List (l.mu held): its
// value, or its failure for ErrorTTL (for the back-off of a throttled list
// at least).
func (l *List[V]) settle(ctx context.Context, f *flight[V], v V, err error, backoff time.Duration) {
	switch {
	case backoff > 0:
		// The cloud asked for no list before backoff has passed: honour
		// it whatever the generation, ctx or ErrorTTL.
		l.fail(err, max(l.errorTTL, backoff), f.stamp.gen, true)
	case f.stamp.gen != l.gen.n.Load():
		// Invalidate ran during this list: answer its joiners, keep nothing.
	case err == nil:
		l.keep(f.stamp, v)
	case ctx.Err() != nil:
		f.canceled = true
	case l.errorTTL > 0:
		l.fail(err, l.errorTTL, f.stamp.gen, false)
	}
}

// keep makes v, listed at s, the kept value (l.mu held).
func (l *List[V]) keep(s Stamp, v V) {
	l.kept, l.has, l.keptAt = v, true, s
	l.failErr, l.throttled = nil, false
}

// fail remembers err for ttl from now (l.mu held).
func (l *List[V]) fail(err error, ttl time.Duration, gen uint64, throttled bool) {
	l.failErr, l.failUntil, l.failGen, l.throttled = err, l.clock.Now().Add(ttl), gen, throttled
}

// Kept returns the kept value, fresh or not, unless an Invalidate dropped
// it. The caller holds the List's lock (Options.Locker).
func (l *List[V]) Kept() (V, bool) {
	if !l.has || l.keptAt.gen != l.gen.n.Load() {
		var zero V
		return zero, false
	}
	return l.kept, true
}

// Fresh returns the kept value if it is fresh, without listing. It takes
// the lock.
func (l *List[V]) Fresh() (V, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.fresh(l.clock.Now(), l.gen.n.Load()) {
		var zero V
		return zero, false
	}
	return l.kept, true
}

// Put keeps v, the value of a list the caller ran itself, started at s
// (a Stamp of the List's Generation), unless an Invalidate came since s.
// It takes the lock.
func (l *List[V]) Put(s Stamp, v V) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.gen == l.gen.n.Load() {
		l.keep(s, v)
	}
}

// Invalidate drops the kept value and any remembered failure that was not
// throttled, and stops counting the list running now (see List). It does
// not take the lock.
func (l *List[V]) Invalidate() { l.gen.Invalidate() }
