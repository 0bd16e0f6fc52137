package routes

import (
	"context"
	"fmt"
	"time"

	"github.com/ccmkit/ccmkit/internal/throttle"
)

// retryAfter is throttle.RetryAfter: ccmkit's one reading of the
// throttling convention.
var retryAfter = throttle.RetryAfter

// giveUp decides whether a call that has waited waited for throttling so
// far may wait d more after a throttled driver call. It returns "" to wait,
// or why not: d is not positive (no delay to honour; retrying at once would
// busy-loop), d would take the call past Config.MaxThrottleWait, or past
// ctx's deadline.
func (t *Table) giveUp(ctx context.Context, d, waited time.Duration) string {
	switch {
	case d <= 0:
		return fmt.Sprintf("throttled with RetryAfter %v, not retried: want a positive delay", d)
	case waited+d > t.cfg.MaxThrottleWait:
		return fmt.Sprintf("throttled; waiting another %v after %v would exceed Config.MaxThrottleWait %v", d, waited, t.cfg.MaxThrottleWait)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return fmt.Sprintf("throttled; the caller's deadline is in %v, before the %v to wait", time.Until(dl).Round(time.Millisecond), d)
	}
	return ""
}

// sleep waits d, or until ctx ends and then returns ctx.Err().
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retry runs call, and again after each throttled answer's delay, until it
// returns anything else, giveUp says stop, or ctx ends (then it returns an
// error wrapping ctx.Err() and the throttled driver error). waited is the
// time the Table already waited for the Table call this driver call
// serves, shared by all its driver calls.
func (t *Table) retry(ctx context.Context, waited *time.Duration, call func() error) error {
	for {
		err := call()
		d, throttled := retryAfter(err)
		if !throttled {
			return err
		}
		t.stats.throttled.Add(1)
		if why := t.giveUp(ctx, d, *waited); why != "" {
			return fmt.Errorf("%s: %w", why, err)
		}
		if serr := sleep(ctx, d); serr != nil {
			return fmt.Errorf("%w while it waited %v to retry a throttled driver call: %w", serr, d, err)
		}
		*waited += d
	}
}
