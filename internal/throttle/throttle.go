// Package throttle holds ccmkit's one reading of its throttling convention:
// a Driver says "throttled, retry after D" by returning an error that wraps
// an *api.RetryError (k8s.io/cloud-provider/api). Every block that waits for
// or passes on such an error asks RetryAfter, and every block that waits
// one out decides with GiveUp and waits with Sleep (Retry does both). It is
// internal: users see only the convention, documented on each Driver.
package throttle

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"
)

// ErrRefused is wrapped by the error of a call that was turned away before
// it could change anything: beside an *api.RetryError, the governor's
// refusal of a call over its budget and the fake cloud's rate limit. A
// cache that marks what a failed write named as "in doubt" (it may have
// changed half-way) leaves it trusted after such an error instead, so a
// refused write costs no extra read. An error without it (a Driver's 429,
// which may come half-way through several cloud calls) is taken as a
// failure that may have changed something.
//
// Users see it as loadbalancer.ErrRefused, the same value, which is the
// one a provider's Driver wraps (it cannot import this package); package
// loadbalancer documents when.
var ErrRefused = errors.New("refused before any change")

// Refused reports whether err wraps ErrRefused: the call changed nothing.
func Refused(err error) bool { return errors.Is(err, ErrRefused) }

// RetryAfter reports whether err says "throttled" (it wraps a non-nil
// *api.RetryError, found with errors.As) and the delay that error asks for.
func RetryAfter(err error) (time.Duration, bool) {
	var re *api.RetryError
	if errors.As(err, &re) && re != nil {
		return re.RetryAfter(), true
	}
	return 0, false
}

// Delay returns err, a throttled failure, as an error whose first
// *api.RetryError (errors.As) asks to retry in d: a block that knows better
// than the Driver when to come back (a cache backing off, a back-off across
// many callers) says so without losing what err wraps (errors.Is and
// errors.As still find it, after the new delay).
func Delay(err error, d time.Duration) error {
	return &delayed{retry: api.NewRetryError(fmt.Sprintf("throttled: retry after %v", d), d), err: err}
}

// delayed is a throttled failure with the delay its caller should wait.
// Unwrap yields retry first, so errors.As finds that delay rather than an
// older one inside err.
type delayed struct {
	retry *api.RetryError
	err   error
}

func (e *delayed) Error() string { return fmt.Sprintf("%v (%v)", e.err, e.retry) }

func (e *delayed) Unwrap() []error { return []error{e.retry, e.err} }

// GiveUp decides whether a call that has already waited waited for
// throttles may wait d more within budget, the caller's
// Config.MaxThrottleWait (so its words name it). It returns "" to wait, or
// why not: d is not positive (no delay to honour; retrying at once would
// busy-loop), waited+d would exceed budget (a budget of zero or less never
// waits), or d would outlast ctx's deadline.
func GiveUp(ctx context.Context, d, waited, budget time.Duration) string {
	switch {
	case d <= 0:
		return fmt.Sprintf("throttled with RetryAfter %v, not retried: expected a positive delay", d)
	case waited+d > budget:
		return fmt.Sprintf("throttled; waiting another %v after %v would exceed Config.MaxThrottleWait %v", d, waited, budget)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return fmt.Sprintf("throttled; the caller's deadline is in %v, before the %v to wait", time.Until(dl).Round(time.Millisecond), d)
	}
	return ""
}

// Sleep waits d on c (nil: the real clock), or until ctx ends and then
// returns ctx.Err(). A test's fake clock (k8s.io/utils/clock/testing)
// ends the wait when it is stepped past d.
func Sleep(ctx context.Context, c clock.Clock, d time.Duration) error {
	if c == nil {
		c = clock.RealClock{}
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Budget is the time one caller may wait for throttles in all, across
// every Retry it makes: each wait is charged to it. Safe for concurrent use.
type Budget struct {
	max    time.Duration
	clock  clock.Clock  // the waits run on it
	waited atomic.Int64 // a time.Duration
}

// NewBudget returns a Budget of max (its Config.MaxThrottleWait) whose
// waits run on c (nil: the real clock); a max of zero or less never waits.
func NewBudget(max time.Duration, c clock.Clock) *Budget { return &Budget{max: max, clock: c} }

// Retry calls fn, and calls it again after each throttled error (see
// RetryAfter) once the delay that error asks for has passed (Sleep), as
// long as GiveUp lets it wait, every delay waited, by this call or an
// earlier one, counting against b. A nil b never waits. It returns fn's
// first error that is not throttled (nil included), or the throttled error
// it stopped waiting on: at once when GiveUp says why not, or when ctx ends
// during a wait.
func Retry(ctx context.Context, b *Budget, fn func() error) error {
	for {
		err := fn()
		d, throttled := RetryAfter(err)
		if !throttled || b == nil || GiveUp(ctx, d, time.Duration(b.waited.Load()), b.max) != "" || Sleep(ctx, b.clock, d) != nil {
			return err
		}
		b.waited.Add(int64(d))
	}
}
