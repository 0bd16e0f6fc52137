package routes

import (
	"context"
	"fmt"
	"time"

	"github.com/ccmkit/ccmkit/internal/throttle"
)

// retry runs call, and again after each throttled answer's delay, until it
// returns anything else, throttle.GiveUp says stop (within
// Options.MaxThrottleWait), or ctx ends (then it returns an error wrapping
// ctx.Err() and the throttled driver error). waited is the time the Table
// already waited for the Table call this driver call serves, shared by all
// its driver calls.
func (t *Table) retry(ctx context.Context, waited *time.Duration, call func() error) error {
	for {
		err := call()
		d, throttled := throttle.RetryAfter(err)
		if !throttled {
			return err
		}
		t.stats.throttled.Add(1)
		if why := throttle.GiveUp(ctx, d, *waited, t.opts.MaxThrottleWait); why != "" {
			return fmt.Errorf("%s: %w", why, err)
		}
		if serr := throttle.Sleep(ctx, t.clock, d); serr != nil {
			return fmt.Errorf("%w while it waited %v to retry a throttled driver call: %w", serr, d, err)
		}
		*waited += d
	}
}
