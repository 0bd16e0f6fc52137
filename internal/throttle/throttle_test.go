package throttle

import (
	"errors"
	"fmt"
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
