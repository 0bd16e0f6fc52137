package throttle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/cloud-provider/api"
)

func TestRetryAfter(t *testing.T) {
	var nilRetry *api.RetryError
	for _, tc := range []struct {
		name   string
		err    error
		want   time.Duration
		ok     bool
		reason string
	}{
		{name: "nil", err: nil, reason: "no error is not throttling"},
		{name: "plain", err: errors.New("503"), reason: "any other error is not throttling"},
		{name: "direct", err: api.NewRetryError("429", 3*time.Second), want: 3 * time.Second, ok: true, reason: "the convention itself"},
		{name: "wrapped twice", err: fmt.Errorf("a: %w", fmt.Errorf("b: %w", api.NewRetryError("429", time.Minute))), want: time.Minute, ok: true, reason: "drivers and blocks wrap it"},
		{name: "joined", err: errors.Join(errors.New("x"), api.NewRetryError("429", time.Second)), want: time.Second, ok: true, reason: "errors.As walks joined errors"},
		{name: "typed nil", err: fmt.Errorf("w: %w", nilRetry), reason: "a nil *RetryError has no delay to honour"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RetryAfter(tc.err)
			if got != tc.want || ok != tc.ok {
				t.Errorf("RetryAfter(%v) = %v, %v; want %v, %v (%s)", tc.err, got, ok, tc.want, tc.ok, tc.reason)
			}
		})
	}
}

func TestDelay(t *testing.T) {
	sentinel := errors.New("429 from the cloud")
	inner := fmt.Errorf("list: %w: %w", sentinel, api.NewRetryError("429", time.Second))
	err := Delay(inner, time.Minute)
	if d, ok := RetryAfter(err); !ok || d != time.Minute {
		t.Errorf("RetryAfter(Delay(err, 1m)) = %v, %v; want 1m, true: the new delay comes first", d, ok)
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("errors.Is(Delay(err), sentinel) = false; want what err wraps to stay findable")
	}
	if msg := err.Error(); !strings.Contains(msg, "429 from the cloud") || !strings.Contains(msg, "1m0s") {
		t.Errorf("Delay(err).Error() = %q; want err's message and the new delay", msg)
	}
}

func TestRetry(t *testing.T) {
	throttled := func(d time.Duration) error { return fmt.Errorf("429: %w", api.NewRetryError("slow down", d)) }
	boom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		errs   []error // fn's answers, in order; past the end: nil
		budget time.Duration
		ctx    func() (context.Context, context.CancelFunc)
		calls  int
		want   error // compared with errors.Is; nil means success
		reason string
	}{
		{name: "success", errs: nil, budget: time.Second, calls: 1, reason: "no error: one call"},
		{name: "other error", errs: []error{boom}, budget: time.Second, calls: 1, want: boom, reason: "only throttling is waited out"},
		{name: "waited out", errs: []error{throttled(time.Millisecond), throttled(time.Millisecond)}, budget: time.Second, calls: 3, reason: "two short throttles within the budget, then success"},
		{name: "then other error", errs: []error{throttled(time.Millisecond), boom}, budget: time.Second, calls: 2, want: boom, reason: "the first error that is not a throttle ends it"},
		{name: "no budget", errs: []error{throttled(time.Millisecond)}, budget: 0, calls: 1, want: api.NewRetryError("", 0), reason: "a zero budget never waits"},
		{name: "over budget", errs: []error{throttled(3 * time.Millisecond), throttled(3 * time.Millisecond)}, budget: 5 * time.Millisecond, calls: 2, want: api.NewRetryError("", 0), reason: "3ms+3ms > 5ms: the second throttle is returned"},
		{name: "no delay", errs: []error{throttled(0)}, budget: time.Second, calls: 1, want: api.NewRetryError("", 0), reason: "a zero delay is not waited: it would busy-loop"},
		{name: "past the deadline", errs: []error{throttled(time.Hour)}, budget: 2 * time.Hour, calls: 1, want: api.NewRetryError("", 0),
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Minute)
			},
			reason: "the wait would outlast the caller's deadline"},
		{name: "cancelled during the wait", errs: []error{throttled(time.Hour)}, budget: 2 * time.Hour, calls: 1, want: api.NewRetryError("", 0),
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(5*time.Millisecond, cancel)
				return ctx, cancel
			},
			reason: "a caller that goes away stops the wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			calls := 0
			err := Retry(ctx, NewBudget(tc.budget, nil), func() error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			var re *api.RetryError
			switch {
			case tc.want == nil && err != nil:
				t.Errorf("Retry = %v; want nil (%s)", err, tc.reason)
			case tc.want != nil && errors.As(tc.want, &re) && !errors.As(err, &re):
				t.Errorf("Retry = %v; want the throttled error (%s)", err, tc.reason)
			case tc.want != nil && !errors.As(tc.want, &re) && !errors.Is(err, tc.want):
				t.Errorf("Retry = %v; want %v (%s)", err, tc.want, tc.reason)
			}
			if calls != tc.calls {
				t.Errorf("fn called %d times; want %d (%s)", calls, tc.calls, tc.reason)
			}
		})
	}
}

// TestRetrySharesBudget: the budget bounds a caller's waits in all, across
// its calls of Retry, not each call (Config.MaxThrottleWait is "in all").
func TestRetrySharesBudget(t *testing.T) {
	throttledOnce := func() func() error {
		n := 0
		return func() error {
			if n++; n == 1 {
				return fmt.Errorf("429: %w", api.NewRetryError("slow down", 3*time.Millisecond))
			}
			return nil
		}
	}
	b := NewBudget(5*time.Millisecond, nil)
	if err := Retry(context.Background(), b, throttledOnce()); err != nil {
		t.Fatalf("first Retry = %v; want its 3ms throttle waited out within the 5ms budget", err)
	}
	if _, ok := RetryAfter(Retry(context.Background(), b, throttledOnce())); !ok {
		t.Errorf("second Retry on the same budget waited another 3ms after 3ms; want the throttle returned: 6ms exceeds the 5ms budget")
	}
	if _, ok := RetryAfter(Retry(context.Background(), nil, throttledOnce())); !ok {
		t.Errorf("Retry with a nil budget waited; want the throttle returned at once")
	}
}

func TestGiveUp(t *testing.T) {
	withDeadline := func(in time.Duration) func() (context.Context, context.CancelFunc) {
		return func() (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), in) }
	}
	for _, tc := range []struct {
		name              string
		d, waited, budget time.Duration
		ctx               func() (context.Context, context.CancelFunc)
		want              string // substring of the reason; "" means wait
		reason            string
	}{
		{name: "within budget", d: time.Second, waited: time.Second, budget: 2 * time.Second, reason: "1s+1s fits a 2s budget"},
		{name: "zero delay", d: 0, budget: time.Minute, want: "throttled with RetryAfter 0s, not retried: expected a positive delay", reason: "no delay to honour"},
		{name: "negative delay", d: -time.Second, budget: time.Minute, want: "RetryAfter -1s, not retried", reason: "no delay to honour"},
		{name: "over budget", d: 2 * time.Second, waited: time.Second, budget: 2 * time.Second,
			want: "throttled; waiting another 2s after 1s would exceed Config.MaxThrottleWait 2s", reason: "1s+2s > 2s"},
		{name: "no budget", d: time.Millisecond, budget: 0, want: "would exceed Config.MaxThrottleWait 0s", reason: "a zero budget never waits"},
		{name: "past the deadline", d: time.Hour, budget: 2 * time.Hour, ctx: withDeadline(time.Minute),
			want: "throttled; the caller's deadline is in", reason: "the wait would outlast the caller's deadline"},
		{name: "before the deadline", d: time.Millisecond, budget: time.Second, ctx: withDeadline(time.Hour), reason: "the deadline is far"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			got := GiveUp(ctx, tc.d, tc.waited, tc.budget)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("GiveUp(%v, waited %v, budget %v) = %q; want %q (%s)", tc.d, tc.waited, tc.budget, got, tc.want, tc.reason)
			}
		})
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), nil, time.Millisecond); err != nil {
		t.Errorf("Sleep(1ms) = %v; want nil once the delay has passed", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, nil, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(1h) with an ended ctx = %v; want context.Canceled at once", err)
	}
}
