package routes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/cloud-provider/api"
)

// lockedTable is a TableDriver whose table is locked by someone else:
// ReadTable announces itself on entered and fails when its ctx ends,
// naming the lock, as a cloud's client does when its deadline ends.
type lockedTable struct{ entered chan struct{} }

func (l lockedTable) ReadTable(ctx context.Context) ([]Entry, string, error) {
	close(l.entered)
	<-ctx.Done()
	return nil, "", fmt.Errorf("table lock held by job 7: %w", ctx.Err())
}

func (lockedTable) WriteTable(context.Context, string, []Entry) error {
	return errors.New("lockedTable: no write expected")
}

// throttledTable is a TableDriver whose ReadTable, once entered, is
// throttled when its ctx ends: a cloud that answered 429 to a call its
// caller gave up on.
type throttledTable struct{ entered chan struct{} }

func (l throttledTable) ReadTable(ctx context.Context) ([]Entry, string, error) {
	close(l.entered)
	<-ctx.Done()
	return nil, "", fmt.Errorf("429: %w", api.NewRetryError("slow down", time.Hour))
}

func (throttledTable) WriteTable(context.Context, string, []Entry) error {
	return errors.New("throttledTable: no write expected")
}

// TestBatchContextErrors checks what a whole-table call returns when its
// context ends while it waits: an error wrapping ctx.Err() that names the
// route, says what it was waiting for and, when its batch left it a
// result, wraps that too — never a bare ctx.Err().
func TestBatchContextErrors(t *testing.T) {
	newTbl := func(t *testing.T, d TableDriver, c Options) *Table {
		t.Helper()
		tbl, err := NewWholeTable(d, c)
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	cases := []struct {
		name, reason string
		// run makes the call whose ctx ends and returns its error.
		run  func(t *testing.T) error
		want []string
	}{
		{name: "ended before", reason: "a call whose ctx has already ended joins no batch",
			run: func(t *testing.T) error {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return <-create(newTbl(t, newGateTable(), Options{}), ctx, "10.0.1.0/24")
			},
			want: []string{`routes: CreateRoute: route "`, `"10.0.1.0/24" -> node "n": context canceled before it joined a batch`}},
		{name: "queued", reason: "a follower waits for a batch to take it while an earlier batch holds the table",
			run: func(t *testing.T) error {
				g := newGateTable()
				defer close(g.gate)
				tbl := newTbl(t, g, Options{BatchWindow: -1})
				lead := create(tbl, t.Context(), "10.0.1.0/24")
				<-g.entered
				ctx, cancel := context.WithCancel(t.Context())
				ch := create(tbl, ctx, "10.0.2.0/24")
				waitPending(t, tbl, 1)
				cancel()
				err := <-ch
				g.gate <- struct{}{}
				<-lead
				return err
			},
			want: []string{`"10.0.2.0/24" -> node "n": context canceled while it waited for a batch to take it`}},
		{name: "window", reason: "a leader gathering calls for its batch",
			run: func(t *testing.T) error {
				tbl := newTbl(t, newGateTable(), Options{BatchWindow: time.Hour})
				ctx, cancel := context.WithCancel(t.Context())
				ch := create(tbl, ctx, "10.0.1.0/24")
				waitPending(t, tbl, 1)
				cancel()
				return <-ch
			},
			want: []string{`"10.0.1.0/24" -> node "n": context canceled before its batch started`}},
		{name: "taken", reason: "a follower whose batch is reading the table",
			run: func(t *testing.T) error {
				g := newGateTable()
				tbl := newTbl(t, g, Options{BatchWindow: time.Hour, MaxBatch: 2})
				lead := create(tbl, t.Context(), "10.0.1.0/24")
				waitPending(t, tbl, 1)
				ctx, cancel := context.WithCancel(t.Context())
				ch := create(tbl, ctx, "10.0.2.0/24")
				<-g.entered
				cancel()
				err := <-ch
				close(g.gate)
				<-lead
				return err
			},
			want: []string{`"10.0.2.0/24" -> node "n": context canceled while its batch read and wrote the route table`}},
		{name: "held table", reason: "the deadline ends the leader's batch in the driver: its error says what held the table",
			run: func(t *testing.T) error {
				locked := lockedTable{make(chan struct{})}
				tbl := newTbl(t, locked, Options{BatchWindow: -1})
				ctx, cancel := context.WithCancel(t.Context())
				ch := create(tbl, ctx, "10.0.1.0/24")
				<-locked.entered
				cancel()
				return <-ch
			},
			want: []string{`"10.0.1.0/24" -> node "n": context canceled while its batch read and wrote the route table`,
				"read route table: table lock held by job 7"}},
		{name: "throttled leader", reason: "the leader's ctx ends while its batch is throttled: said once, and nothing was applied",
			run: func(t *testing.T) error {
				throttled := throttledTable{make(chan struct{})}
				tbl := newTbl(t, throttled, Options{BatchWindow: -1, MaxThrottleWait: 2 * time.Hour})
				ctx, cancel := context.WithCancel(t.Context())
				ch := create(tbl, ctx, "10.0.1.0/24")
				<-throttled.entered
				cancel()
				return <-ch
			},
			want: []string{`"10.0.1.0/24" -> node "n": context canceled while its batch was throttled by the cloud`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			synctest.Test(t, func(t *testing.T) { err = tc.run(t) })
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: %v; want an error wrapping context.Canceled", tc.reason, err)
			}
			if err == context.Canceled { //nolint:errorlint // a bare, unwrapped context.Canceled is the failure checked for
				t.Errorf("%s: a bare context.Canceled; want it wrapped with what the call waited for", tc.reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q does not contain %q", tc.reason, err, w)
				}
			}
			if n := strings.Count(err.Error(), "-> node"); n != 1 {
				t.Errorf("%s: error %q names the route %d times; want once", tc.reason, err, n)
			}
		})
	}
}
