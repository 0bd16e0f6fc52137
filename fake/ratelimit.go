package fake

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/internal/throttle"
)

// errThrottled is wrapped, together with an *api.RetryError, by the error of
// a cloud API call the rate limit refused (see RateLimit): branch with
// errors.Is(err, errThrottled), and read the delay with errors.As into an
// *api.RetryError.
var errThrottled = errors.New("fake: rate limit exceeded")

// throttled is the error of a call the rate limit refused: errThrottled
// and its *api.RetryError, and throttle.ErrRefused (the call changed
// nothing, so ccmkit's caches keep trusting what it named).
type throttled struct{ retry *api.RetryError }

func (e *throttled) Error() string { return errThrottled.Error() + ": " + e.retry.Error() }

func (e *throttled) Unwrap() []error { return []error{errThrottled, e.retry, throttle.ErrRefused} }

// limiter is the rate limit of one cloud account: the two token buckets
// that every Cloud over one store (New's and its peers') draws from. It is
// safe for concurrent use.
type limiter struct {
	now func() time.Time
	on  atomic.Bool // some class is limited: unlimited calls skip mu

	mu      sync.Mutex
	limit   RateLimit  // as set, for RateLimit()
	buckets [2]*bucket // reads, writes; nil: unlimited
}

// bucket is a token bucket in the form of the generic cell rate
// algorithm: instead of a token count it keeps the theoretical arrival
// time tat of the next call, which makes it exact in integer nanoseconds.
// The bucket is full when tat is not after now; each call moves tat one
// interval on; a call is refused while tat is more than tolerance (burst-1
// intervals) ahead of now, and may retry when it no longer is.
type bucket struct {
	class     string // "reads" or "writes", for errors
	rate      float64
	burst     int
	interval  time.Duration // one token
	tolerance time.Duration // burst-1 tokens
	tat       time.Time
}

func newLimiter(now func() time.Time, r RateLimit) *limiter {
	l := &limiter{now: now}
	l.set(r)
	return l
}

// set replaces the limits; r must be valid (RateLimit.validate). Every
// bucket starts full.
func (l *limiter) set(r RateLimit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limit = r.clone()
	l.on.Store(r.limited())
	for i, class := range []struct {
		name string
		rate *float64
	}{{"reads", r.ReadsPerSecond}, {"writes", r.WritesPerSecond}} {
		l.buckets[i] = nil
		if class.rate != nil {
			interval := max(time.Duration(float64(time.Second) / *class.rate), 1)
			l.buckets[i] = &bucket{class: class.name, rate: *class.rate, burst: r.Burst,
				interval: interval, tolerance: time.Duration(r.Burst-1) * interval}
		}
	}
}

// get returns a copy of the limits.
func (l *limiter) get() RateLimit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit.clone()
}

// take draws a token for op from its class's bucket. When there is none it
// returns an error wrapping errThrottled and an *api.RetryError whose delay
// is the time until a token is free.
func (l *limiter) take(op Op) error {
	if !l.on.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[0]
	if op.Writes() {
		b = l.buckets[1]
	}
	if b == nil {
		return nil
	}
	now := l.now()
	tat := b.tat
	if tat.Before(now) {
		tat = now
	}
	if ahead := tat.Sub(now); ahead > b.tolerance {
		wait := ahead - b.tolerance
		retry := api.NewRetryError(fmt.Sprintf("%s: %s limited to %g per second (burst %d); retry after %v", op, b.class, b.rate, b.burst, wait), wait)
		return &throttled{retry: retry}
	}
	b.tat = tat.Add(b.interval)
	return nil
}

// SetRateLimit (the admin endpoint's PUT /ratelimit) replaces the rate limit of the cloud account — this Cloud's
// and its peers' (see NewPeer) — at run time; every bucket starts full. r is
// taken as it is (Config.Realistic's defaults do not apply): a nil rate is
// unlimited, and the zero RateLimit removes every limit. It returns an
// error naming the field, the value and what was expected for a rate that
// is not positive or a Burst below 1 with a rate (or not 0 without one),
// and then changes nothing. Safe for concurrent use.
func (c *Cloud) SetRateLimit(r RateLimit) error {
	if errs := r.validate(nil); len(errs) > 0 {
		return fmt.Errorf("fake: invalid RateLimit: %w", errs.ToAggregate())
	}
	c.store.limits.set(r)
	return nil
}

// RateLimit returns a copy of the rate limit in force (after
// Config.Realistic's defaults and any PUT /ratelimit). Safe for concurrent
// use.
func (c *Cloud) RateLimit() RateLimit { return c.store.limits.get() }

// SetProvisioningDelay (the admin endpoint's PUT /provisioning) sets how long load balancers created from now on
// (by this Cloud and its peers) report no ingress; those already created
// keep the moment they are ready. It returns an error for a negative
// delay, and then changes nothing. With Config.StateFile it applies to this
// process only. It does not change the Reconciler's RetryAfter, which New
// derived from Config.LoadBalancers.ProvisioningDelay. Safe for concurrent
// use.
func (c *Cloud) SetProvisioningDelay(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("fake: provisioning delay %v: expected zero (no delay) or a positive duration", d)
	}
	c.store.delay.Store(int64(d))
	return nil
}

// ProvisioningDelay returns the provisioning delay of load balancers
// created from now on. Safe for concurrent use.
func (c *Cloud) ProvisioningDelay() time.Duration { return time.Duration(c.store.delay.Load()) }
