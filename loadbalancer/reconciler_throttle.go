package loadbalancer

import (
	"errors"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/internal/throttle"
)

// maxThrottleDelay bounds the back-off EnsureLoadBalancer asks of the
// service controller for a Service whose calls keep being throttled, before
// the random part (see EnsureLoadBalancer).
const maxThrottleDelay = 5 * time.Minute

// minThrottleDelay is the shortest back-off after a throttled call: a
// throttled cloud is not helped by retries within the second.
const minThrottleDelay = time.Second

// spread returns err with the back-off of a throttled call (see
// EnsureLoadBalancer), and counts consecutive throttled calls per Service:
// any other outcome resets the count. A RetryError of the Reconciler's own
// (comeBack: no address yet, a busy cloud) is no throttle: it is returned
// as it is.
func (r *Reconciler) spread(svc *v1.Service, err error) error {
	if svc == nil {
		return err
	}
	key := svc.Namespace + "/" + svc.Name
	d, throttled := throttle.RetryAfter(err)
	var own *comeBack
	if !throttled || errors.As(err, &own) {
		if r.hasThrottles.Load() {
			r.mu.Lock()
			delete(r.throttles, key)
			r.hasThrottles.Store(len(r.throttles) > 0)
			r.mu.Unlock()
		}
		return err
	}
	r.mu.Lock()
	r.throttles[key]++
	n := r.throttles[key]
	r.hasThrottles.Store(true)
	r.mu.Unlock()
	return throttle.Delay(err, backoff(d, n))
}

// backoff is the delay after the n-th consecutive throttled call whose
// cloud asked for d: max(d, minThrottleDelay) doubled n-1 times, at most
// maxThrottleDelay, plus a random part of up to as much again.
func backoff(d time.Duration, n int) time.Duration {
	d = max(d, minThrottleDelay)
	for i := 1; i < n && d < maxThrottleDelay; i++ {
		d *= 2
	}
	d = min(d, maxThrottleDelay)
	return d + rand.N(d) //nolint:gosec // G404: jitter of a back-off, not a secret
}
