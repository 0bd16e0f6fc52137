package throttle

import (
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
