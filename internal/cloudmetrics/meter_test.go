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

// TestMeter checks that Meter records every call once, nested Meters each
// their own call (a cache's call below the call it received is the
// cache's), that a call whose error wraps ErrNotCalled is not recorded,
// and that f's error is returned unchanged and classified. The test does
// not run in parallel: the registry is process-wide.
func TestMeter(t *testing.T) {
	notFound := errors.New("no such thing")
	refused := fmt.Errorf("governor: refused: %w", cloudmetrics.ErrNotCalled)
	tests := []struct {
		name   string
		reason string
		call   func(ctx context.Context) error // one metered call of "Outer"
		want   map[string]float64
	}{
		{
			name: "plain driver", reason: "a call is recorded",
			call: meter("Outer", func(context.Context) error { return nil }),
			want: map[string]float64{"Outer ok": 1},
		},
		{
			name: "not found", reason: "the error is classified with the notFound sentinels",
			call: meter("Outer", func(context.Context) error { return fmt.Errorf("x: %w", notFound) }, notFound),
			want: map[string]float64{"Outer not-found": 1},
		},
		{
			name: "not called", reason: "a call answered without the cloud (a governor's refusal) is not recorded",
			call: meter("Outer", func(context.Context) error { return refused }),
			want: map[string]float64{},
		},
		{
			name: "nested", reason: "each Meter records its own call",
			call: meter("Outer", func(ctx context.Context) error {
				return meter("Inner", func(context.Context) error { return errors.New("boom") })(ctx)
			}),
			want: map[string]float64{"Outer error": 1, "Inner error": 1},
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
	if err := meter("Outer", func(context.Context) error { return boom })(t.Context()); err != boom { //nolint:errorlint // f's error must come back unchanged, unwrapped
		t.Errorf("Meter returned %v, want f's error unchanged", err)
	}
	if v, err := cloudmetrics.Metered(t.Context(), "metertest", "Value", func(context.Context) (int, error) { return 7, nil }); v != 7 || err != nil {
		t.Errorf("Metered = %v, %v; want f's 7, nil", v, err)
	}
}

// TestMetersItself: a Driver embedding SelfMetered, directly or through
// an embedded Driver, meters itself; any other value does not.
func TestMetersItself(t *testing.T) {
	type cache struct{ cloudmetrics.SelfMetered }
	type wrapper struct{ *cache }
	type holder struct{ next *cache }
	for _, tc := range []struct {
		name string
		d    any
		want bool
	}{
		{name: "cache", d: &cache{}, want: true},
		{name: "embedding wrapper", d: wrapper{&cache{}}, want: true},
		{name: "holding wrapper", d: holder{&cache{}}, want: false},
		{name: "nil", d: nil, want: false},
	} {
		if got := cloudmetrics.MetersItself(tc.d); got != tc.want {
			t.Errorf("MetersItself(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
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
