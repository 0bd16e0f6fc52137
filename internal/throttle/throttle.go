// Package throttle holds ccmkit's one reading of its throttling convention:
// a Driver says "throttled, retry after D" by returning an error that wraps
// an *api.RetryError (k8s.io/cloud-provider/api). Every block that waits for
// or passes on such an error asks RetryAfter. It is internal: users see only
// the convention, documented on each Driver.
package throttle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/cloud-provider/api"
)

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

// Retry calls fn, and calls it again after each throttled error (see
// RetryAfter) once the delay that error asks for has passed, as long as
// the delays waited for this call add up to no more than budget and the
// next wait ends before ctx's deadline. It returns fn's first error that is
// not throttled (nil included), or the throttled error it stopped waiting
// on: at once when the delay is not positive (nothing to wait for: retrying
// would busy-loop), would exceed the budget or the deadline, or when ctx
// ends during a wait. A budget of zero or less never waits.
func Retry(ctx context.Context, budget time.Duration, fn func() error) error {
	var waited time.Duration
	for {
		err := fn()
		d, throttled := RetryAfter(err)
		if !throttled || d <= 0 || waited+d > budget {
			return err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
			return err
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		waited += d
	}
}
