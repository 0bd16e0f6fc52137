package listcache_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ccmkit/ccmkit/internal/listcache"
	"github.com/ccmkit/ccmkit/internal/throttle"
)

// hookClock is a FakeClock whose onNow, when set, is called on every Now:
// a Get reads the clock once, with the lock held, before it decides to
// join a running list, so a count of readings tells a test that every Get
// has joined, without sleeping.
type hookClock struct {
	*clocktesting.FakeClock
	onNow atomic.Pointer[func()]
}

func newHookClock() *hookClock {
	return &hookClock{FakeClock: clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
}

func (c *hookClock) Now() time.Time {
	if f := c.onNow.Load(); f != nil && *f != nil {
		(*f)()
	}
	return c.FakeClock.Now()
}

func (c *hookClock) setOnNow(f func()) { c.onNow.Store(&f) }

// lister is a list function whose answers a test scripts: it counts its
// calls, and answer, when set, decides each one.
type lister struct {
	calls  atomic.Int64
	answer func(ctx context.Context, n int64) (int64, error)
}

func (l *lister) run() listcache.Run[int64] {
	return listcache.Run[int64]{List: func(ctx context.Context) (int64, error) {
		n := l.calls.Add(1)
		if l.answer != nil {
			return l.answer(ctx, n)
		}
		return n, nil
	}}
}

// result is one Get's outcome.
type result struct {
	V      int64
	Origin listcache.Origin
	Err    string
}

func get(ctx context.Context, c *listcache.List[int64], l *lister) result {
	v, o, err := c.Get(ctx, l.run)
	r := result{V: v, Origin: o}
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

// TestGetTTL: the value serves for TTL counted from the start of its list
// (a list that takes 40s of a 1m TTL leaves 20s), then one Get lists again.
func TestGetTTL(t *testing.T) {
	clk := newHookClock()
	l := &lister{}
	l.answer = func(_ context.Context, n int64) (int64, error) {
		if n == 1 {
			clk.Step(40 * time.Second) // the first list is slow
		}
		return n, nil
	}
	c := listcache.New[int64](listcache.Options{TTL: time.Minute, Clock: clk})
	var got []result
	got = append(got, get(t.Context(), c, l))
	clk.Step(19 * time.Second) // 59s after the list started
	got = append(got, get(t.Context(), c, l))
	clk.Step(time.Second) // a TTL after it started
	got = append(got, get(t.Context(), c, l))
	got = append(got, get(t.Context(), c, l))
	want := []result{{V: 1, Origin: listcache.Listed}, {V: 1, Origin: listcache.Cached}, {V: 2, Origin: listcache.Listed}, {V: 2, Origin: listcache.Cached}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get outcomes (-want +got):\n%s", diff)
	}
}

// TestGetSingleFlight: Get calls that find a list running wait for it and
// share its value; only one list runs.
func TestGetSingleFlight(t *testing.T) {
	const joiners = 16
	clk := newHookClock()
	var reads atomic.Int64
	allJoined := make(chan struct{})
	clk.setOnNow(func() {
		if reads.Add(1) == joiners+1 { // the leader's reading, then each joiner's
			close(allJoined)
		}
	})
	l := &lister{}
	l.answer = func(ctx context.Context, n int64) (int64, error) {
		select {
		case <-allJoined:
			return 7, nil
		case <-time.After(30 * time.Second): // deadlock guard, not a timing assertion
			return 0, errors.New("the joiners never all asked")
		}
	}
	c := listcache.New[int64](listcache.Options{TTL: time.Minute, Clock: clk})
	results := make(chan result, joiners+1)
	var wg sync.WaitGroup
	for range joiners + 1 {
		wg.Go(func() { results <- get(t.Context(), c, l) })
	}
	wg.Wait()
	close(results)
	count := map[result]int{}
	for r := range results {
		count[r]++
	}
	want := map[result]int{{V: 7, Origin: listcache.Listed}: 1, {V: 7, Origin: listcache.Joined}: joiners}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("Get outcomes (-want +got):\n%s", diff)
	}
	if n := l.calls.Load(); n != 1 {
		t.Errorf("%d lists, want 1: concurrent Gets share one", n)
	}
}

// TestGetErrorTTL: a failed list is remembered for ErrorTTL (none when it
// is not positive), through Options.Err.
func TestGetErrorTTL(t *testing.T) {
	for _, tt := range []struct {
		name     string
		errorTTL time.Duration
		want     []result // at 0, 9s and 10s after the failure
		reason   string
	}{
		{name: "remembered", errorTTL: 10 * time.Second, reason: "an outage costs one list per ErrorTTL",
			want: []result{{Err: "cache: 503", Origin: listcache.Listed}, {Err: "cache: 503", Origin: listcache.Cached}, {V: 2, Origin: listcache.Listed}}},
		{name: "none", errorTTL: -1, reason: "a failure not remembered: the next Get lists again",
			want: []result{{Err: "cache: 503", Origin: listcache.Listed}, {V: 2, Origin: listcache.Listed}, {V: 2, Origin: listcache.Cached}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := newHookClock()
			l := &lister{}
			l.answer = func(_ context.Context, n int64) (int64, error) {
				if n == 1 {
					return 0, errors.New("503")
				}
				return n, nil
			}
			c := listcache.New[int64](listcache.Options{TTL: time.Minute, ErrorTTL: tt.errorTTL, Clock: clk,
				Err: func(err error) error { return fmt.Errorf("cache: %w", err) }})
			var got []result
			for _, step := range []time.Duration{0, 9 * time.Second, time.Second} {
				clk.Step(step)
				got = append(got, get(t.Context(), c, l))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Get outcomes (-want +got):\n%s\n(%s)", diff, tt.reason)
			}
		})
	}
}

// TestGetThrottled: a throttled list (RetryAfter D) is remembered for
// max(ErrorTTL, D), across Invalidate; each Get in that window gets a
// RetryError of the time left, wrapping the list's error even when
// Options.Err dropped the RetryError.
func TestGetThrottled(t *testing.T) {
	for _, tt := range []struct {
		name     string
		errorTTL time.Duration
		retry    time.Duration
		window   time.Duration
		reason   string
	}{
		{name: "delay longer", errorTTL: 5 * time.Second, retry: 30 * time.Second, window: 30 * time.Second, reason: "the cloud's delay is honoured"},
		{name: "ErrorTTL longer", errorTTL: time.Minute, retry: 2 * time.Second, window: time.Minute, reason: "max(ErrorTTL, D)"},
		{name: "no ErrorTTL", errorTTL: -1, retry: 10 * time.Second, window: 10 * time.Second, reason: "a throttle is remembered whatever ErrorTTL is"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := newHookClock()
			cause := errors.New("429")
			l := &lister{}
			l.answer = func(_ context.Context, n int64) (int64, error) {
				if n == 1 {
					return 0, fmt.Errorf("%w: %w", cause, api.NewRetryError("slow down", tt.retry))
				}
				return n, nil
			}
			c := listcache.New[int64](listcache.Options{TTL: time.Minute, ErrorTTL: tt.errorTTL, Clock: clk,
				Err: func(err error) error { return fmt.Errorf("cache: %v", err) }}) //nolint:errorlint // drops the RetryError on purpose
			checkThrottled := func(when string, left time.Duration) {
				t.Helper()
				_, _, err := c.Get(t.Context(), l.run)
				if d, ok := throttle.RetryAfter(err); !ok || d != left {
					t.Errorf("%s: Get error %v: RetryAfter %v, %v; want %v, true", when, err, d, ok, left)
				}
				if err == nil || !strings.Contains(err.Error(), "cache: 429") {
					t.Errorf("%s: Get error %v, want it to carry the list's error", when, err)
				}
			}
			checkThrottled("the throttled list", tt.retry)
			clk.Step(tt.window / 2)
			c.Invalidate()
			checkThrottled("after Invalidate, within the window", tt.window-tt.window/2)
			if n := l.calls.Load(); n != 1 {
				t.Errorf("%d lists within the window, want 1 (%s)", n, tt.reason)
			}
			clk.Step(tt.window - tt.window/2)
			if got := get(t.Context(), c, l); got != (result{V: 2, Origin: listcache.Listed}) {
				t.Errorf("Get after the window: %+v, want a new list", got)
			}
		})
	}
}

// TestGetCanceledLeader: when the list fails while the context of the Get
// that ran it has ended, that Get gets the error, a joiner with a live
// context lists again, and nothing is remembered.
func TestGetCanceledLeader(t *testing.T) {
	clk := newHookClock()
	listing := make(chan struct{})
	l := &lister{}
	l.answer = func(ctx context.Context, n int64) (int64, error) {
		if n > 1 {
			return n, nil
		}
		close(listing)
		<-ctx.Done()
		return 0, ctx.Err()
	}
	c := listcache.New[int64](listcache.Options{TTL: time.Minute, ErrorTTL: time.Minute, Clock: clk})
	leaderCtx, cancel := context.WithCancel(t.Context())
	leader := make(chan result, 1)
	go func() { leader <- get(leaderCtx, c, l) }()
	<-listing
	clk.setOnNow(func() { cancel() }) // the joiner has looked and is about to wait
	joiner := get(t.Context(), c, l)
	clk.setOnNow(nil)
	if want := (result{V: 2, Origin: listcache.Listed}); joiner != want {
		t.Errorf("joiner: %+v, want %+v: it lists again", joiner, want)
	}
	if got, want := <-leader, (result{Origin: listcache.Listed, Err: "context canceled"}); got != want {
		t.Errorf("leader: %+v, want %+v", got, want)
	}
	if got := get(t.Context(), c, l); got != (result{V: 2, Origin: listcache.Cached}) {
		t.Errorf("Get after: %+v, want the joiner's list, kept", got)
	}
}

// TestGetCanceledJoiner: a joiner whose own context ends stops waiting
// with ctx.Err(); the list goes on and its value is kept.
func TestGetCanceledJoiner(t *testing.T) {
	clk := newHookClock()
	listing, release := make(chan struct{}), make(chan struct{})
	l := &lister{}
	l.answer = func(_ context.Context, n int64) (int64, error) {
		close(listing)
		<-release
		return n, nil
	}
	c := listcache.New[int64](listcache.Options{TTL: time.Minute, Clock: clk})
	leader := make(chan result, 1)
	go func() { leader <- get(t.Context(), c, l) }()
	<-listing
	ctx, cancel := context.WithCancel(t.Context())
	clk.setOnNow(cancel)
	_, o, err := c.Get(ctx, l.run)
	clk.setOnNow(nil)
	if o != listcache.Joined || err != context.Canceled { //nolint:errorlint // the joiner's own context error, unwrapped
		t.Errorf("canceled joiner: (%v, %v), want (Joined, context.Canceled) unwrapped", o, err)
	}
	close(release)
	if got := <-leader; got != (result{V: 1, Origin: listcache.Listed}) {
		t.Errorf("leader: %+v, want its list", got)
	}
	if got := get(t.Context(), c, l); got != (result{V: 1, Origin: listcache.Cached}) {
		t.Errorf("Get after: %+v, want the leader's list, kept", got)
	}
}

// TestInvalidateDuringList: a list running when Invalidate is called
// answers the Gets that joined it but is not kept, and a Get after
// Invalidate does not join it.
func TestInvalidateDuringList(t *testing.T) {
	clk := newHookClock()
	listing, release := make(chan struct{}), make(chan struct{})
	l := &lister{}
	l.answer = func(_ context.Context, n int64) (int64, error) {
		if n == 1 {
			close(listing)
			<-release
		}
		return n, nil
	}
	c := listcache.New[int64](listcache.Options{TTL: time.Minute, Clock: clk})
	old := make(chan result, 1)
	go func() { old <- get(t.Context(), c, l) }()
	<-listing
	c.Invalidate()
	if got := get(t.Context(), c, l); got != (result{V: 2, Origin: listcache.Listed}) {
		t.Errorf("Get after Invalidate: %+v, want a list of its own", got)
	}
	close(release)
	if got := <-old; got != (result{V: 1, Origin: listcache.Listed}) {
		t.Errorf("the Get that listed before Invalidate: %+v, want its list", got)
	}
	if got := get(t.Context(), c, l); got != (result{V: 2, Origin: listcache.Cached}) {
		t.Errorf("Get at the end: %+v, want the list after Invalidate kept, not the older one", got)
	}
	if v, ok := c.Fresh(); !ok || v != 2 {
		t.Errorf("Fresh() = %v, %v; want 2, true", v, ok)
	}
}

// TestRunDone: Done runs with the lock held (Options.Locker) once the list
// returned, with its outcome, and its value is the one kept and shared.
func TestRunDone(t *testing.T) {
	var mu sync.Mutex
	c := listcache.New[int64](listcache.Options{TTL: time.Minute, ErrorTTL: -1, Clock: newHookClock(), Locker: &mu})
	var dones []string
	run := func(answer error) func() listcache.Run[int64] {
		return func() listcache.Run[int64] {
			return listcache.Run[int64]{
				List: func(context.Context) (int64, error) { return 1, answer },
				Done: func(v int64, err error) int64 {
					dones = append(dones, fmt.Sprintf("v=%d err=%v locked=%v", v, err, !mu.TryLock()))
					return v + 10
				},
			}
		}
	}
	if _, _, err := c.Get(t.Context(), run(errors.New("503"))); err == nil {
		t.Error("failed list: nil error")
	}
	v, o, err := c.Get(t.Context(), run(nil))
	if v != 11 || o != listcache.Listed || err != nil {
		t.Errorf("Get = (%v, %v, %v), want (11, Listed, nil): Done's value", v, o, err)
	}
	mu.Lock()
	kept, ok := c.Kept()
	mu.Unlock()
	if kept != 11 || !ok {
		t.Errorf("Kept() = %v, %v; want 11, true", kept, ok)
	}
	want := []string{"v=0 err=503 locked=true", "v=1 err=<nil> locked=true"}
	if diff := cmp.Diff(want, dones); diff != "" {
		t.Errorf("Done calls (-want +got):\n%s", diff)
	}
}

// TestPutShared: Lists that share a Generation are invalidated together;
// Put keeps the value of a read only while no Invalidate came since its
// Stamp, for TTL from the Stamp.
func TestPutShared(t *testing.T) {
	clk := newHookClock()
	var gen listcache.Generation
	a := listcache.New[int64](listcache.Options{TTL: time.Minute, Clock: clk, Generation: &gen})
	b := listcache.New[int64](listcache.Options{TTL: time.Minute, Clock: clk, Generation: &gen})
	s := gen.Stamp(clk.Now())
	clk.Step(30 * time.Second) // the read takes half the TTL
	a.Put(s, 1)
	b.Put(s, 2)
	fresh := func() [2]bool {
		_, okA := a.Fresh()
		_, okB := b.Fresh()
		return [2]bool{okA, okB}
	}
	if got := fresh(); got != [2]bool{true, true} {
		t.Errorf("after Put: fresh %v, want both", got)
	}
	a.Invalidate()
	if got := fresh(); got != [2]bool{false, false} {
		t.Errorf("after Invalidate of one: fresh %v, want neither: they share a Generation", got)
	}
	b.Put(s, 3) // a read begun before the Invalidate
	if got := fresh(); got != [2]bool{false, false} {
		t.Errorf("after a Put of a read begun before Invalidate: fresh %v, want neither", got)
	}
	s = gen.Stamp(clk.Now())
	a.Put(s, 4)
	clk.Step(59 * time.Second)
	if v, ok := a.Fresh(); v != 4 || !ok {
		t.Errorf("59s after the read began: Fresh() = %v, %v; want 4, true", v, ok)
	}
	clk.Step(time.Second)
	if _, ok := a.Fresh(); ok {
		t.Error("a TTL after the read began: fresh, want stale")
	}
}

// TestGetPanic: a list that panics panics in the Get that ran it; its
// joiners and the failure memory get an error naming the list.
func TestGetPanic(t *testing.T) {
	clk := newHookClock()
	listing, release := make(chan struct{}), make(chan struct{})
	l := &lister{}
	l.answer = func(context.Context, int64) (int64, error) {
		close(listing)
		<-release
		panic("boom")
	}
	c := listcache.New[int64](listcache.Options{TTL: time.Minute, ErrorTTL: time.Minute, Clock: clk, Name: "test list"})
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		get(t.Context(), c, l)
	}()
	<-listing
	var reads atomic.Int64
	clk.setOnNow(func() {
		if reads.Add(1) == 1 { // the joiner has looked and is about to wait
			close(release)
		}
	})
	joiner := get(t.Context(), c, l)
	clk.setOnNow(nil)
	if r := <-panicked; r != "boom" {
		t.Errorf("the Get that listed recovered %v, want the list's panic", r)
	}
	want := result{Origin: listcache.Joined, Err: "test list panicked: boom"}
	if joiner != want {
		t.Errorf("joiner: %+v, want %+v", joiner, want)
	}
	if got := get(t.Context(), c, l); got != (result{Origin: listcache.Cached, Err: want.Err}) {
		t.Errorf("Get after: %+v, want the remembered failure", got)
	}
}
