package governor

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/internal/throttle"
)

// The defaults of Options and Limit, stated in their field docs.
const (
	defaultReadRate  = 20
	defaultWriteRate = 10
	defaultBurst     = 20
	defaultMaxPause  = 5 * time.Minute
)

// Class is a class of cloud calls with a token bucket of its own.
type Class uint8

// The classes. Every Driver method the wrappers govern is one of them (see
// the package doc, Wrappers).
const (
	// Reads are the calls that only look: Find, List, GetByID, ReadTable, ….
	Reads Class = iota
	// Writes are the calls that change the cloud: Apply, Delete,
	// CreateRoute, WriteTable, ….
	Writes
)

const numClasses = 2

var classNames = [numClasses]string{"reads", "writes"}

// String returns "reads", "writes" or "Class(n)".
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", c)
}

// Priority orders the calls of one class when its budget runs short: a
// call of a lower priority yields to the ones above it (see the package
// doc, Priorities).
type Priority uint8

// The priorities, highest first.
const (
	// Urgent calls may take any token: creating a new Service's load
	// balancer, deleting one, and the instance and route reads.
	Urgent Priority = iota
	// Normal calls may take a token while the bucket keeps the class's
	// Limit.NormalReserve for urgent ones: load-balancer reads, updates
	// that are not backend-only, route writes.
	Normal
	// Background calls may take a token while the bucket keeps the class's
	// Limit.BackgroundReserve for the others: the backend-only updates of
	// the periodic node sync.
	Background
)

const numPriorities = 3

var priorityNames = [numPriorities]string{"urgent", "normal", "background"}

// String returns "urgent", "normal", "background" or "Priority(n)".
func (p Priority) String() string {
	if p < numPriorities {
		return priorityNames[p]
	}
	return fmt.Sprintf("Priority(%d)", p)
}

// Limit is the budget of one class of calls: a token bucket of Burst
// tokens refilled at Rate per second, each admitted call taking one, with
// the reserves that give urgent calls precedence.
type Limit struct {
	// Rate is how many calls per second the class may make in the long
	// run. 0 means 20 for Reads and 10 for Writes; negative, NaN,
	// infinite or below one call an hour is an error. Set it below your
	// cloud's own limit for the account, less what other clients of that
	// account use.
	Rate float64
	// Burst is how many calls the class may make at once after an idle
	// time (the bucket's capacity). 0 means 20; negative or above
	// 1,000,000 is an error.
	Burst int
	// NormalReserve is how many tokens a normal call leaves in the bucket
	// for urgent ones: it may take a token only while the bucket holds
	// more than NormalReserve. 0 means Burst/4, rounded down; negative
	// means none. It must be below Burst.
	NormalReserve int
	// BackgroundReserve is how many tokens a background call leaves in the
	// bucket for normal and urgent ones. 0 means Burst/2, rounded down;
	// negative means none. It must be below Burst and at least
	// NormalReserve (a background call never goes before a normal one).
	BackgroundReserve int
}

// Options configures a Governor. The zero value is usable: reads at 20
// per second, writes at 10, bursts of 20, reserves of a quarter and a half
// of the burst, pauses of at most five minutes, every *api.RetryError a
// pause, and the real clock.
type Options struct {
	// Reads is the budget of read calls; see Limit for its defaults.
	Reads Limit
	// Writes is the budget of write calls; see Limit for its defaults.
	Writes Limit
	// MaxPause bounds the pause of a class after a throttled answer: a
	// cloud asking to come back later than MaxPause pauses the class for
	// MaxPause (the refused calls' RetryAfter says so, and the next call
	// that is throttled pauses it again). 0 means five minutes; negative
	// means none: the Governor never pauses, and throttled answers reach
	// the caller as they are.
	MaxPause time.Duration
	// Throttled reports whether err, the error of a governed call, is the
	// cloud refusing it for the account's rate limit, and the delay it
	// asked for. Nil means every error wrapping an *api.RetryError
	// (errors.As) with its RetryAfter: ccmkit's one convention for
	// "throttled". A loadbalancer Driver may also return an *api.RetryError
	// for a load balancer that is still provisioning (see
	// loadbalancer.Driver); if yours does, set Throttled to tell the two
	// apart, or every provisioning answer pauses all writes. It is called
	// concurrently, without the Governor's lock.
	Throttled func(err error) (retryAfter time.Duration, ok bool)
	// Clock is the Governor's time; nil means clock.RealClock{}. Tests
	// inject a fake clock (k8s.io/utils/clock/testing). A Governor never
	// waits, so it only reads the time: any clock.PassiveClock will do.
	// It is read concurrently and with the lock of a class held, so it
	// must be safe for concurrent use and must not call the Governor.
	Clock clock.PassiveClock
}

// withDefaults returns o with its zero fields set to their documented
// defaults.
func (o Options) withDefaults() Options {
	o.Reads = o.Reads.withDefaults(defaultReadRate)
	o.Writes = o.Writes.withDefaults(defaultWriteRate)
	if o.MaxPause == 0 {
		o.MaxPause = defaultMaxPause
	}
	if o.Throttled == nil {
		o.Throttled = throttle.RetryAfter
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// withDefaults returns l with its zero fields set to their documented
// defaults, rate being the class's default rate.
func (l Limit) withDefaults(rate float64) Limit {
	if l.Rate == 0 {
		l.Rate = rate
	}
	if l.Burst == 0 {
		l.Burst = defaultBurst
	}
	if l.NormalReserve == 0 {
		l.NormalReserve = l.Burst / 4
	}
	if l.BackgroundReserve == 0 {
		l.BackgroundReserve = l.Burst / 2
	}
	return l
}

// The bounds of a Limit, which keep every bucket's arithmetic within a
// time.Duration.
const (
	minRate  = 1.0 / 3600 // one call an hour
	maxBurst = 1_000_000
)

// validate returns the first field of l (with its defaults) that is out
// of range, as an error naming it by its path (field, "Options.Reads")
// and saying what was expected. raw is l as given, for the messages, and
// rate the class's default rate.
func (l Limit) validate(field string, raw Limit, rate float64) error {
	switch {
	case raw.Rate < 0 || math.IsNaN(raw.Rate) || math.IsInf(raw.Rate, 0) || (raw.Rate > 0 && raw.Rate < minRate):
		return fmt.Errorf("%s.Rate %v: expected 0 (the default, %v per second) or a finite rate of at least one call an hour (%.6f)", field, raw.Rate, rate, minRate)
	case raw.Burst < 0 || raw.Burst > maxBurst:
		return fmt.Errorf("%s.Burst %d: expected 0 (the default, %d) or a positive number up to %d", field, raw.Burst, defaultBurst, maxBurst)
	case l.NormalReserve >= l.Burst:
		return fmt.Errorf("%s.NormalReserve %d: expected below Burst %d (a normal call could never take a token), or negative for none", field, l.NormalReserve, l.Burst)
	case l.BackgroundReserve >= l.Burst:
		return fmt.Errorf("%s.BackgroundReserve %d: expected below Burst %d (a background call could never take a token), or negative for none", field, l.BackgroundReserve, l.Burst)
	case max(l.BackgroundReserve, 0) < max(l.NormalReserve, 0):
		value := fmt.Sprint(l.BackgroundReserve)
		if raw.BackgroundReserve == 0 {
			value += " (the default, Burst/2)"
		}
		return fmt.Errorf("%s.BackgroundReserve %s: expected at least NormalReserve %d (a background call never goes before a normal one)", field, value, l.NormalReserve)
	}
	return nil
}

// Governor is a client-side budget of cloud calls shared by all of a
// provider's Drivers: one token bucket per Class, with Priorities, paused
// by the cloud's Retry-After (see the package doc). Admit decides a call,
// Observe learns from its result; the wrappers (LoadBalancer,
// LoadBalancerList, Instances, InstanceList, Routes, RouteTable) do both
// around every Driver call.
//
// A Governor never blocks and never sleeps: a call it cannot admit now is
// refused at once with an error wrapping ErrOverBudget and an
// *api.RetryError that says when to come back. It starts no goroutines.
// It is safe for concurrent use. Create it with New; a nil *Governor
// governs nothing (it admits every call and its wrappers return the Driver
// they are given).
type Governor struct {
	clock     clock.PassiveClock
	throttled func(error) (time.Duration, bool)
	maxPause  time.Duration
	classes   [numClasses]class
}

// class is the state of one Class: its bucket, its theoretical arrival
// time and its pause, under mu, and its metric series.
type class struct {
	bucket bucket // immutable after New
	series *cloudmetrics.GovernorClass

	mu          sync.Mutex
	tat         time.Time // see bucket
	pausedUntil time.Time // the end of the cloud's last Retry-After, for messages
}

// New returns a Governor with opts. It returns an error naming the field,
// its value and what was expected when a field of opts is out of range
// (see Options and Limit); the error wraps nothing. It starts nothing.
func New(opts Options) (*Governor, error) {
	full := opts.withDefaults()
	if err := full.Reads.validate("Options.Reads", opts.Reads, defaultReadRate); err != nil {
		return nil, fmt.Errorf("governor.New: %w", err)
	}
	if err := full.Writes.validate("Options.Writes", opts.Writes, defaultWriteRate); err != nil {
		return nil, fmt.Errorf("governor.New: %w", err)
	}
	g := &Governor{clock: full.Clock, throttled: full.Throttled, maxPause: full.MaxPause}
	for c, l := range [numClasses]Limit{Reads: full.Reads, Writes: full.Writes} {
		g.classes[c].bucket = newBucket(l)
		g.classes[c].series = cloudmetrics.GovernorSeries(classNames[c], priorityNames[:])
	}
	return g, nil
}

// ErrOverBudget is wrapped, with an *api.RetryError, by every refusal of a
// Governor: the call was not made, and may be made after the
// RetryError's RetryAfter. Branch with errors.Is; read the delay with
// errors.As (or let the block above read it: every ccmkit block treats it
// as any throttled answer).
var ErrOverBudget = errors.New("over the cloud-call budget")

// Admit decides a call of class c and priority p at once: nil when it may
// go (it has taken a token of c's bucket), and otherwise an error wrapping
// ErrOverBudget and an *api.RetryError whose RetryAfter is when a token of
// c will be free for p (positive, rounded up to the millisecond). The
// error's message names the class, the priority, the wait and whether the
// class is paused by the cloud's Retry-After. An unknown c or p is an
// error that wraps neither. A nil Governor admits every call. Safe for
// concurrent use; it never blocks on anything but the lock of c.
func (g *Governor) Admit(c Class, p Priority) error {
	if g == nil {
		return nil
	}
	if c >= numClasses || p >= numPriorities {
		return fmt.Errorf("governor: class %v and priority %v: expected Reads or Writes and Urgent, Normal or Background", c, p)
	}
	cl := &g.classes[c]
	cl.mu.Lock()
	now := g.clock.Now()
	tat, wait := cl.bucket.take(cl.tat, now, p)
	cl.tat = tat
	tokens := cl.bucket.tokens(tat, now)
	paused := now.Before(cl.pausedUntil)
	if wait == 0 {
		cl.series.Admitted(int(p), tokens)
		cl.mu.Unlock()
		return nil
	}
	cl.series.Refused(int(p), tokens)
	cl.mu.Unlock()
	return refuse(c, p, retryAfter(wait), paused)
}

// Observe learns from err, the result of a call of class c that Admit let
// through: when Options.Throttled says the cloud throttled it with a
// positive delay D, no call of c is admitted before D (at most
// Options.MaxPause) has passed, and then at c's rate, urgent calls first
// (see the package doc, Retry-After). Any other result, a refusal of a
// Governor (ErrOverBudget: no cloud answered) and an unknown c change
// nothing. A nil Governor does nothing. Safe for concurrent use.
func (g *Governor) Observe(c Class, err error) {
	if g == nil || err == nil || g.maxPause < 0 || c >= numClasses || errors.Is(err, ErrOverBudget) {
		return
	}
	d, ok := g.throttled(err)
	if !ok || d <= 0 {
		return
	}
	cl := &g.classes[c]
	cl.mu.Lock()
	defer cl.mu.Unlock()
	now := g.clock.Now()
	until := now.Add(min(d, g.maxPause))
	extended := until.Sub(later(cl.pausedUntil, now))
	cl.pausedUntil = later(cl.pausedUntil, until)
	cl.tat = cl.bucket.pause(cl.tat, until)
	cl.series.Paused(max(extended, 0), cl.bucket.tokens(cl.tat, now))
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// refusal is the error of a call the Governor refused: an *api.RetryError
// (held by value, one allocation for both) and ErrOverBudget. It also
// wraps throttle.ErrRefused (the call changed nothing) and
// cloudmetrics.ErrNotCalled (no cloud call was made: the blocks' meters
// do not record it).
type refusal struct{ retry api.RetryError }

func (r *refusal) Error() string { return r.retry.Error() }

func (r *refusal) Unwrap() []error {
	return []error{&r.retry, ErrOverBudget, throttle.ErrRefused, cloudmetrics.ErrNotCalled}
}

// refuse returns the refusal of a call of class c and priority p that may
// come back after wait; paused says the class is paused by the cloud.
func refuse(c Class, p Priority, wait time.Duration, paused bool) error {
	why := "the budget is spent"
	if paused {
		why = "the cloud's Retry-After pauses " + classNames[c]
	}
	msg := "governor: " + priorityNames[p] + " " + classNames[c] + " call refused: " + why + "; retry after " + wait.String()
	return &refusal{retry: *api.NewRetryError(msg, wait)}
}
