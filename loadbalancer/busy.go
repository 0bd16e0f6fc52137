package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/internal/throttle"
)

// BusyError says that the cloud is busy with a load balancer: it refuses
// writes to it for about After (OpenStack Octavia, for one, leaves a load
// balancer PENDING_UPDATE for a second or so after each write to one of its
// child objects and answers 409 to a write meanwhile). It is not
// throttling: it is not, and does not wrap, an *api.RetryError, so the
// Reconciler comes back after After exactly, with no back-off (see
// Driver for what it means from each method, alone and beside
// ErrRefused). Create it with Busy.
type BusyError struct {
	// After is how long the cloud stays busy, from the answer. Zero or
	// less is read as one second.
	After time.Duration
	// Msg says what the cloud answered, for logs: its status, the state of
	// the load balancer. It may be empty.
	Msg string
}

// Error says that the load balancer is busy, for how long, and Msg.
func (e *BusyError) Error() string {
	s := fmt.Sprintf("the cloud is busy with the load balancer for %v", e.After)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Busy returns a *BusyError of after and msg, for a Driver to return as it
// is ("applied; the cloud is busy for after"), or wrapped with ErrRefused
// ("refused because the cloud is busy; nothing changed"), for instance
// fmt.Errorf("octavia: 409 PENDING_UPDATE: %w%w", loadbalancer.Busy(time.Second, ""), loadbalancer.ErrRefused).
func Busy(after time.Duration, msg string) error {
	return &BusyError{After: after, Msg: msg}
}

// minBusyDelay is the wait after a BusyError whose After is zero or
// less: as for a throttle, no cloud is helped by a retry within the
// second.
const minBusyDelay = minThrottleDelay

// busyOf returns the *BusyError err wraps and the delay it asks for, or
// nil when err is not busy. An error that also wraps an *api.RetryError is
// throttling, as every block of ccmkit reads it (internal/throttle), not
// busy.
func busyOf(err error) (*BusyError, time.Duration) {
	var b *BusyError
	if !errors.As(err, &b) || b == nil {
		return nil, 0
	}
	if _, throttled := throttle.RetryAfter(err); throttled {
		return nil, 0
	}
	if b.After <= 0 {
		return b, minBusyDelay
	}
	return b, b.After
}

// appliedBusy reports whether err is the busy answer of a call that took
// effect: busy (busyOf) and not refused.
func appliedBusy(err error) bool {
	b, _ := busyOf(err)
	return b != nil && !throttle.Refused(err)
}

// busyBudget is the context key of the *busyWait of a Reconciler method
// (Options.MaxBusyWait).
type busyBudget struct{}

// busyWait is what one Reconciler method may still wait, in all, for a
// busy cloud. It is used by the goroutine of that method only.
type busyWait struct {
	max, waited time.Duration
}

// waitBusy returns ctx carrying a budget of Options.MaxBusyWait for the
// busy waits of the method it is given to (awaitBusy).
func (r *Reconciler) waitBusy(ctx context.Context) context.Context {
	return context.WithValue(ctx, busyBudget{}, &busyWait{max: r.opts.MaxBusyWait})
}

// awaitBusy waits d on Options.Clock, the delay of err, the busy answer
// of a call (busyOf), when it fits in what the method's budget has left
// (waitBusy) and before ctx's deadline. When it does not fit it returns a
// *stillBusy wrapping err at once; when ctx ends during the wait, ctx's
// error.
func (r *Reconciler) awaitBusy(ctx context.Context, err error, d time.Duration) error {
	b, _ := ctx.Value(busyBudget{}).(*busyWait)
	if b == nil {
		b = &busyWait{max: -1}
	}
	switch {
	case b.max < 0:
		return &stillBusy{err: err, after: d, why: "Options.MaxBusyWait is negative: never waiting"}
	case b.waited+d > b.max:
		return &stillBusy{err: err, after: d, why: fmt.Sprintf("waiting %v more after %v would exceed Options.MaxBusyWait %v", d, b.waited, b.max)}
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return &stillBusy{err: err, after: d, why: fmt.Sprintf("the caller's deadline is in %v, before the %v to wait", time.Until(dl).Round(time.Millisecond), d)}
	}
	if werr := throttle.Sleep(ctx, r.opts.Clock, d); werr != nil {
		return fmt.Errorf("waiting %v for the busy cloud: %w (after %w)", d, werr, err)
	}
	b.waited += d
	return nil
}

// stillBusy is the error of a method that stopped because the cloud is
// busy and the wait does not fit (awaitBusy): err is the busy answer,
// wrapped with the call it answered, after how long to come back.
// EnsureLoadBalancer returns it as a RetryError of exactly after
// (comeBackAfter); the other methods return it as it is.
type stillBusy struct {
	err   error
	after time.Duration
	why   string
}

func (e *stillBusy) Error() string { return fmt.Sprintf("%v; %s", e.err, e.why) }

func (e *stillBusy) Unwrap() error { return e.err }

// comeBack is a RetryError of the Reconciler's own, with the error that
// led to it (nil: none): come back after exactly its delay. Nothing was
// throttled (the load balancer has no address yet, or the cloud is busy),
// so spread neither doubles it nor counts it. errors.As finds retry first,
// then what err wraps.
type comeBack struct {
	retry *api.RetryError
	err   error
}

func (e *comeBack) Error() string {
	if e.err == nil {
		return e.retry.Error()
	}
	return fmt.Sprintf("%v (retry after %v)", e.err, e.retry.RetryAfter())
}

func (e *comeBack) Unwrap() []error {
	if e.err == nil {
		return []error{e.retry}
	}
	return []error{e.retry, e.err}
}

// notReady is the comeBack of a load balancer without an address yet,
// after d: it is provisioning.
func notReady(msg string, d time.Duration) error {
	return &comeBack{retry: api.NewRetryError(msg, d)}
}

// converged reports whether err, an ensure error, says the load balancer
// was converged: nil, or the Reconciler's own "no address yet" (a
// comeBack wrapping no error), which ensure returns after converging.
func converged(err error) bool {
	var cb *comeBack
	return err == nil || errors.As(err, &cb) && cb.err == nil
}

// comeBackAfter returns err, an EnsureLoadBalancer error, as a comeBack
// of exactly the delay of the *stillBusy it wraps, if any; else err.
func comeBackAfter(err error) error {
	var sb *stillBusy
	if !errors.As(err, &sb) {
		return err
	}
	return &comeBack{retry: api.NewRetryError(sb.Error(), sb.after), err: err}
}
