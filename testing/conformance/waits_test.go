package conformance

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cloud-provider/api"
)

// TestRetrying checks which answers retrying makes again and what it
// returns: only an error wrapping a non-nil *api.RetryError is retried,
// while the call's context is live, until Config.Timeout.
func TestRetrying(t *testing.T) {
	boom := errors.New("boom")
	retry := func() error { return fmt.Errorf("throttled: %w", api.NewRetryError("429", time.Millisecond)) }
	for _, tc := range []struct {
		name, reason string
		answers      []error // the error of each call; the last repeats
		cancelled    bool    // the call's context is done
		wantCalls    int     // 0: more than one, until Config.Timeout
		wantValue    int     // the value returned: the number of the call
		wantErr      string  // substring of the error; "" for nil
	}{
		{name: "success", reason: "an answer without an error is returned at once",
			answers: []error{nil}, wantCalls: 1, wantValue: 1},
		{name: "other-error", reason: "an error that is not an api.RetryError is returned at once, unchanged",
			answers: []error{boom}, wantCalls: 1, wantValue: 1, wantErr: "boom"},
		{name: "retry-then-success", reason: "a wrapped api.RetryError is made again, and the later success returned",
			answers: []error{retry(), retry(), nil}, wantCalls: 3, wantValue: 3},
		{name: "retry-then-other-error", reason: "after retries, another error is returned unchanged",
			answers: []error{retry(), boom}, wantCalls: 2, wantValue: 2, wantErr: "boom"},
		{name: "retry-forever", reason: "an api.RetryError until Config.Timeout is returned, still findable, with a note of the retries",
			answers: []error{retry()}, wantErr: "still an api.RetryError after"},
		{name: "cancelled", reason: "with the call's context done nothing is retried (a stopped controller requeues nothing)",
			answers: []error{retry(), nil}, cancelled: true, wantCalls: 1, wantValue: 1, wantErr: "throttled"},
		{name: "typed-nil-retry-error", reason: "a wrapped nil *api.RetryError has no delay: it is an ordinary error",
			answers: []error{fmt.Errorf("odd: %w", (*api.RetryError)(nil)), nil}, wantCalls: 1, wantValue: 1, wantErr: "odd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &rt{ctx: t.Context(), cfg: &Config{Timeout: 100 * time.Millisecond}}
			ctx := t.Context()
			if tc.cancelled {
				ctx = cancelled()
			}
			calls := 0
			v, err := retrying(r, ctx, func() (int, error) {
				calls++
				return calls, tc.answers[min(calls, len(tc.answers))-1]
			})
			switch {
			case tc.wantCalls == 0 && calls < 2:
				t.Errorf("%s: %d calls, expected retries until Config.Timeout", tc.reason, calls)
			case tc.wantCalls != 0:
				if d := cmp.Diff(tc.wantCalls, calls); d != "" {
					t.Errorf("%s: calls (-want +got):\n%s", tc.reason, d)
				}
				if d := cmp.Diff(tc.wantValue, v); d != "" {
					t.Errorf("%s: value (-want +got):\n%s", tc.reason, d)
				}
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("%s: error %v, expected one containing %q", tc.reason, err, tc.wantErr)
			}
			var re *api.RetryError
			if tc.wantCalls == 0 && !errors.As(err, &re) {
				t.Errorf("%s: error %v does not wrap the api.RetryError", tc.reason, err)
			}
		})
	}
}
