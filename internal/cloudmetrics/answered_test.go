package cloudmetrics_test

// An external test package: its tests run after the package's own, whose
// TestRegistered compares the whole registry.

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
)

// TestMeter checks that Meter records a Driver call unless the call
// reached a cache (MarkAnswered on the ctx Meter gave it), that a mark
// reaches Meter through a forwarding context, that nested Meters each
// count their own call, and that f's error is returned unchanged and
// classified. The test does not run in parallel: the registry is
// process-wide.
func TestMeter(t *testing.T) {
	notFound := errors.New("no such thing")
	tests := []struct {
		name   string
		reason string
		call   func(ctx context.Context) error // one metered call of "Outer"
		want   map[string]float64
	}{
		{
			name: "plain driver", reason: "a call no cache received is recorded",
			call: meter("Outer", func(context.Context) error { return nil }),
			want: map[string]float64{"Outer ok": 1},
		},
		{
			name: "not found", reason: "the error is classified with the notFound sentinels",
			call: meter("Outer", func(context.Context) error { return fmt.Errorf("x: %w", notFound) }, notFound),
			want: map[string]float64{"Outer not-found": 1},
		},
		{
			name: "cache answered", reason: "a cache records its own calls: the call it answered is not recorded",
			call: meter("Outer", func(ctx context.Context) error { cloudmetrics.MarkAnswered(ctx); return nil }),
			want: map[string]float64{},
		},
		{
			name: "forwarded ctx", reason: "the mark passes through a context derived from Meter's",
			call: meter("Outer", func(ctx context.Context) error {
				ctx, cancel := context.WithCancel(context.WithValue(ctx, struct{}{}, 1))
				defer cancel()
				cloudmetrics.MarkAnswered(ctx)
				return nil
			}),
			want: map[string]float64{},
		},
		{
			name: "cache and its driver", reason: "the cache's own call below it is recorded once; the call it answered is not",
			call: meter("Outer", func(ctx context.Context) error {
				cloudmetrics.MarkAnswered(ctx)
				return meter("Inner", func(context.Context) error { return errors.New("boom") })(ctx)
			}),
			want: map[string]float64{"Inner error": 1},
		},
		{
			name: "inner mark", reason: "a mark reaches the innermost Meter only",
			call: meter("Outer", func(ctx context.Context) error {
				return meter("Inner", func(ctx context.Context) error { cloudmetrics.MarkAnswered(ctx); return nil })(ctx)
			}),
			want: map[string]float64{"Outer ok": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := read(t)
			err := tt.call(t.Context())
			got := cloudmetrics.Since(read(t), before)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("recorded (-want +got): %s\n%s (call error %v)", tt.reason, diff, err)
			}
		})
	}
	boom := errors.New("boom")
	if err := meter("Outer", func(context.Context) error { return boom })(t.Context()); err != boom {
		t.Errorf("Meter returned %v, want f's error unchanged", err)
	}
	cloudmetrics.MarkAnswered(t.Context()) // a ctx no Meter made: nothing to mark, no panic
}

// meter returns a call of operation on the "metertest" capability through
// Meter, running f.
func meter(operation string, f func(ctx context.Context) error, notFound ...error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		return cloudmetrics.Meter(ctx, "metertest", operation, f, notFound...)
	}
}

func read(t *testing.T) map[string]float64 {
	t.Helper()
	c, err := cloudmetrics.Read()
	if err != nil {
		t.Fatal(err)
	}
	return c.Of("metertest")
}
