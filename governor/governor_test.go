package governor_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/governor"
)

func TestNewValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   governor.Options
		want   string // the whole message; "" means valid
		reason string
	}{
		{name: "zero", reason: "the zero value is usable"},
		{name: "set", opts: governor.Options{Reads: governor.Limit{Rate: 0.5, Burst: 3, NormalReserve: 1, BackgroundReserve: 2}, MaxPause: -1}, reason: "every field in range"},
		{name: "no reserves", opts: governor.Options{Writes: governor.Limit{Burst: 1, NormalReserve: -1, BackgroundReserve: -1}}, reason: "negative reserves mean none"},
		{name: "burst of one", opts: governor.Options{Writes: governor.Limit{Burst: 1}}, reason: "the default reserves of a burst of 1 are 0 and 0"},
		{name: "negative rate", opts: governor.Options{Reads: governor.Limit{Rate: -1}},
			want: "governor.New: Options.Reads.Rate -1: expected 0 (the default, 20 per second) or a finite rate of at least one call an hour (0.000278)", reason: "a rate is never negative"},
		{name: "NaN rate", opts: governor.Options{Writes: governor.Limit{Rate: math.NaN()}},
			want: "governor.New: Options.Writes.Rate NaN: expected 0 (the default, 10 per second) or a finite rate of at least one call an hour (0.000278)", reason: "NaN is no rate"},
		{name: "infinite rate", opts: governor.Options{Writes: governor.Limit{Rate: math.Inf(1)}},
			want: "governor.New: Options.Writes.Rate +Inf: expected 0 (the default, 10 per second) or a finite rate of at least one call an hour (0.000278)", reason: "no limit is no Governor"},
		{name: "rate too low", opts: governor.Options{Writes: governor.Limit{Rate: 1e-5}},
			want: "governor.New: Options.Writes.Rate 1e-05: expected 0 (the default, 10 per second) or a finite rate of at least one call an hour (0.000278)", reason: "the arithmetic stays within a time.Duration"},
		{name: "negative burst", opts: governor.Options{Reads: governor.Limit{Burst: -2}},
			want: "governor.New: Options.Reads.Burst -2: expected 0 (the default, 20) or a positive number up to 1000000", reason: "a burst is never negative"},
		{name: "huge burst", opts: governor.Options{Reads: governor.Limit{Burst: 2_000_000}},
			want: "governor.New: Options.Reads.Burst 2000000: expected 0 (the default, 20) or a positive number up to 1000000", reason: "the arithmetic stays within a time.Duration"},
		{name: "normal reserve of the whole burst", opts: governor.Options{Writes: governor.Limit{Burst: 4, NormalReserve: 4, BackgroundReserve: 4}},
			want: "governor.New: Options.Writes.NormalReserve 4: expected below Burst 4 (a normal call could never take a token), or negative for none", reason: "normal calls would never go"},
		{name: "background reserve of the default burst", opts: governor.Options{Writes: governor.Limit{BackgroundReserve: 20}},
			want: "governor.New: Options.Writes.BackgroundReserve 20: expected below Burst 20 (a background call could never take a token), or negative for none", reason: "background calls would never go"},
		{name: "background before normal", opts: governor.Options{Reads: governor.Limit{Burst: 10, NormalReserve: 3, BackgroundReserve: 2}},
			want: "governor.New: Options.Reads.BackgroundReserve 2: expected at least NormalReserve 3 (a background call never goes before a normal one)", reason: "the reserves are ordered"},
		{name: "background reserve none under a normal one", opts: governor.Options{Reads: governor.Limit{NormalReserve: 1, BackgroundReserve: -1}},
			want: "governor.New: Options.Reads.BackgroundReserve -1: expected at least NormalReserve 1 (a background call never goes before a normal one)", reason: "none is below 1"},
		{name: "default background reserve under a normal one", opts: governor.Options{Reads: governor.Limit{NormalReserve: 15}},
			want: "governor.New: Options.Reads.BackgroundReserve 10 (the default, Burst/2): expected at least NormalReserve 15 (a background call never goes before a normal one)", reason: "the message says the value was the default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := governor.New(tc.opts)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("New(%+v) error:\n got %q\nwant %q\n(%s)", tc.opts, got, tc.want, tc.reason)
			}
			if (err == nil) != (g != nil) {
				t.Errorf("New returned %v and %v: want a Governor or an error", g, err)
			}
		})
	}
}

// admitted makes n calls of class c and priority p and returns how many
// were admitted, and the last refusal.
func admitted(g *governor.Governor, c governor.Class, p governor.Priority, n int) (int, error) {
	ok := 0
	var last error
	for range n {
		if err := g.Admit(c, p); err != nil {
			last = err
		} else {
			ok++
		}
	}
	return ok, last
}

// TestDefaults checks the documented defaults through what they admit on
// a clock that stands still.
func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		class    governor.Class
		priority governor.Priority
		want     int           // admitted out of 30 from a full bucket
		wait     time.Duration // the RetryAfter of the refusals
		reason   string
	}{
		{class: governor.Reads, priority: governor.Urgent, want: 20, wait: 50 * time.Millisecond, reason: "burst 20, a token every 1/20s"},
		{class: governor.Reads, priority: governor.Normal, want: 15, wait: 50 * time.Millisecond, reason: "reserve 20/4 = 5"},
		{class: governor.Reads, priority: governor.Background, want: 10, wait: 50 * time.Millisecond, reason: "reserve 20/2 = 10"},
		{class: governor.Writes, priority: governor.Urgent, want: 20, wait: 100 * time.Millisecond, reason: "burst 20, a token every 1/10s"},
		{class: governor.Writes, priority: governor.Normal, want: 15, wait: 100 * time.Millisecond, reason: "reserve 5"},
		{class: governor.Writes, priority: governor.Background, want: 10, wait: 100 * time.Millisecond, reason: "reserve 10"},
	} {
		t.Run(tc.class.String()+"/"+tc.priority.String(), func(t *testing.T) {
			g := newGovernor(t, newClock(), governor.Options{})
			got, err := admitted(g, tc.class, tc.priority, 30)
			d, _ := retryAfter(err)
			if got != tc.want || d != tc.wait {
				t.Errorf("admitted %d of 30, last RetryAfter %v; want %d, %v: %s", got, d, tc.want, tc.wait, tc.reason)
			}
		})
	}
}

func TestRefusal(t *testing.T) {
	clk := newClock()
	g := newGovernor(t, clk, governor.Options{Writes: governor.Limit{Rate: 4, Burst: 2, NormalReserve: -1, BackgroundReserve: 1}})
	if n, _ := admitted(g, governor.Writes, governor.Urgent, 2); n != 2 {
		t.Fatalf("admitted %d urgent writes from a full bucket of 2, want 2", n)
	}
	clk.Step(100 * time.Millisecond) // 0.4 tokens
	for _, tc := range []struct {
		priority governor.Priority
		wait     time.Duration
		msg      string
	}{
		{priority: governor.Urgent, wait: 150 * time.Millisecond, msg: "governor: urgent writes call refused: the budget is spent; retry after 150ms"},
		{priority: governor.Normal, wait: 150 * time.Millisecond, msg: "governor: normal writes call refused: the budget is spent; retry after 150ms"},
		{priority: governor.Background, wait: 400 * time.Millisecond, msg: "governor: background writes call refused: the budget is spent; retry after 400ms"},
	} {
		err := g.Admit(governor.Writes, tc.priority)
		if !errors.Is(err, governor.ErrOverBudget) {
			t.Errorf("%v: Admit = %v, want an error wrapping ErrOverBudget", tc.priority, err)
		}
		if d, ok := retryAfter(err); !ok || d != tc.wait {
			t.Errorf("%v: RetryAfter = %v, %v; want %v: the time until a token is free for it", tc.priority, d, ok, tc.wait)
		}
		if err != nil && err.Error() != tc.msg {
			t.Errorf("%v: message\n got %q\nwant %q", tc.priority, err.Error(), tc.msg)
		}
	}
	clk.Step(150 * time.Millisecond)
	if err := g.Admit(governor.Writes, governor.Urgent); err != nil {
		t.Errorf("Admit after the RetryAfter = %v, want the token it promised", err)
	}
}

// TestRefusalRoundsUp: a RetryAfter is rounded up to the millisecond, so
// that the caller finds its token when it comes back.
func TestRefusalRoundsUp(t *testing.T) {
	clk := newClock()
	g := newGovernor(t, clk, governor.Options{Reads: governor.Limit{Rate: 3, Burst: 1}})
	spend(t, g, governor.Reads)
	err := g.Admit(governor.Reads, governor.Urgent)
	if d, _ := retryAfter(err); d != 334*time.Millisecond {
		t.Fatalf("RetryAfter at 3 per second = %v (%v), want 334ms: 333.333333ms rounded up", d, err)
	}
	clk.Step(334 * time.Millisecond)
	if err := g.Admit(governor.Reads, governor.Urgent); err != nil {
		t.Errorf("Admit after the RetryAfter = %v, want the token it promised", err)
	}
}

func TestAdmitBadInput(t *testing.T) {
	g := newGovernor(t, newClock(), governor.Options{})
	for _, tc := range []struct {
		class    governor.Class
		priority governor.Priority
		want     string
	}{
		{class: 2, priority: governor.Urgent, want: "governor: class Class(2) and priority urgent: expected Reads or Writes and Urgent, Normal or Background"},
		{class: governor.Reads, priority: 3, want: "governor: class reads and priority Priority(3): expected Reads or Writes and Urgent, Normal or Background"},
	} {
		err := g.Admit(tc.class, tc.priority)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Admit(%v, %v) = %v, want %q", tc.class, tc.priority, err, tc.want)
		}
		if _, ok := retryAfter(err); ok || errors.Is(err, governor.ErrOverBudget) {
			t.Errorf("Admit(%v, %v) = %v: a programming error is not a throttle", tc.class, tc.priority, err)
		}
	}
	g.Observe(7, throttled(time.Second)) // must not panic
}

func TestNilGovernor(t *testing.T) {
	var g *governor.Governor
	for range 100 {
		if err := g.Admit(governor.Writes, governor.Background); err != nil {
			t.Fatalf("nil Governor: Admit = %v, want every call admitted", err)
		}
	}
	g.Observe(governor.Writes, throttled(time.Second))
	c := newCloud()
	d := lbAPI{c}
	if got := g.LoadBalancer(d); got != d {
		t.Errorf("nil Governor: LoadBalancer(d) = %#v, want d itself", got)
	}
}

// TestPriorityFlood simulates a minute of a background flood, with normal
// and urgent calls among it, on the fake clock: the urgent and normal calls
// all go at once, the background ones get what they leave.
func TestPriorityFlood(t *testing.T) {
	clk := newClock()
	g := newGovernor(t, clk, governor.Options{}) // writes: 10/s, burst 20, reserves 5 and 10
	var urgent, normal, background, refusedAbove int
	const tick = 10 * time.Millisecond
	for i := range int(time.Minute / tick) {
		for range 3 {
			if g.Admit(governor.Writes, governor.Background) == nil {
				background++
			}
		}
		if i%25 == 0 { // 4 per second
			if err := g.Admit(governor.Writes, governor.Normal); err != nil {
				refusedAbove++
				t.Logf("normal call refused at %v: %v", time.Duration(i)*tick, err)
			} else {
				normal++
			}
		}
		if i%50 == 0 { // 2 per second
			if err := g.Admit(governor.Writes, governor.Urgent); err != nil {
				refusedAbove++
				t.Logf("urgent call refused at %v: %v", time.Duration(i)*tick, err)
			} else {
				urgent++
			}
		}
		clk.Step(tick)
	}
	if refusedAbove != 0 || normal != 240 || urgent != 120 {
		t.Errorf("under a background flood: %d normal and %d urgent admitted, %d refused; want all 240 and 120 at once", normal, urgent, refusedAbove)
	}
	// The background calls get the rest: 20 tokens at the start and 600
	// refilled, less the 360 others, less the reserve of 10 they leave (and
	// the part of a token refilled since the last one).
	if want := 20 + 600 - 360 - 10; background < want-1 || background > want {
		t.Errorf("background calls admitted: %d, want %d (or one fewer): what the others leave above the reserve", background, want)
	}
}

// TestNormalBeforeBackground: under a flood of normal calls, the
// background calls get nothing while the bucket is below their reserve.
func TestNormalBeforeBackground(t *testing.T) {
	clk := newClock()
	g := newGovernor(t, clk, governor.Options{Writes: governor.Limit{Rate: 10, Burst: 10, NormalReserve: 2, BackgroundReserve: 5}})
	var normal, background int
	for range 1000 { // 10s
		if g.Admit(governor.Writes, governor.Normal) == nil {
			normal++
		}
		if g.Admit(governor.Writes, governor.Background) == nil {
			background++
		}
		clk.Step(10 * time.Millisecond)
	}
	// While the bucket is full both go, until it is down to 6; from then
	// on the normal calls keep it below the 6 a background call needs.
	if background != 2 {
		t.Errorf("background calls admitted under a normal flood: %d, want 2 (the tokens above their reserve before the normal calls drained them)", background)
	}
	// The burst and 9.99s of refill, less the background calls and the
	// urgent reserve.
	if want := 105; normal != want { // floor(10 + 99.9 - 2 - 2)
		t.Errorf("normal calls admitted: %d, want %d", normal, want)
	}
}

func TestRetryAfterPauses(t *testing.T) {
	provisioning := errors.New("still provisioning")
	for _, tc := range []struct {
		name   string
		opts   governor.Options
		class  governor.Class
		err    error
		want   time.Duration // the RetryAfter of an urgent call of class right after; 0: admitted
		other  time.Duration // the same for the other class
		reason string
	}{
		{name: "writes", class: governor.Writes, err: throttled(3 * time.Second), want: 3 * time.Second, reason: "the class pauses for the cloud's delay"},
		{name: "reads", class: governor.Reads, err: fmt.Errorf("list: %w", throttled(2*time.Second)), want: 2 * time.Second, reason: "wrapped, per class: writes go on"},
		{name: "capped", class: governor.Writes, err: throttled(time.Hour), opts: governor.Options{MaxPause: time.Minute}, want: time.Minute, reason: "at most MaxPause"},
		{name: "default cap", class: governor.Writes, err: throttled(time.Hour), want: 5 * time.Minute, reason: "MaxPause 0 means five minutes"},
		{name: "never", class: governor.Writes, err: throttled(time.Hour), opts: governor.Options{MaxPause: -1}, reason: "MaxPause negative: no pause"},
		{name: "other error", class: governor.Writes, err: errors.New("500"), reason: "only a throttle pauses"},
		{name: "no delay", class: governor.Writes, err: throttled(0), reason: "a throttle without a positive delay has none to honour"},
		{name: "a refusal", class: governor.Writes, err: fmt.Errorf("x: %w: %w", governor.ErrOverBudget, throttled(time.Second)), reason: "a Governor's own refusal: no cloud answered"},
		{name: "custom throttled", class: governor.Writes, err: fmt.Errorf("%w: %w", provisioning, throttled(10*time.Second)),
			opts: governor.Options{Throttled: func(err error) (time.Duration, bool) {
				if errors.Is(err, provisioning) {
					return 0, false
				}
				return retryAfter(err)
			}}, reason: "Options.Throttled tells a provisioning load balancer from a rate limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGovernor(t, newClock(), tc.opts)
			g.Observe(tc.class, tc.err)
			got, _ := retryAfter(g.Admit(tc.class, governor.Urgent))
			other, _ := retryAfter(g.Admit(1-tc.class, governor.Urgent))
			if got != tc.want || other != tc.other {
				t.Errorf("after Observe(%v, %v): urgent %v RetryAfter %v, other class %v; want %v, %v: %s", tc.class, tc.err, tc.class, got, other, tc.want, tc.other, tc.reason)
			}
		})
	}
}

// TestPauseMessage: a call refused during a pause says so, and the pause
// ends when the cloud said.
func TestPauseMessage(t *testing.T) {
	clk := newClock()
	g := newGovernor(t, clk, governor.Options{})
	g.Observe(governor.Reads, throttled(30*time.Second))
	clk.Step(10 * time.Second)
	g.Observe(governor.Reads, throttled(5*time.Second)) // shorter: changes nothing
	err := g.Admit(governor.Reads, governor.Urgent)
	if want := "governor: urgent reads call refused: the cloud's Retry-After pauses reads; retry after 20s"; err == nil || err.Error() != want {
		t.Errorf("Admit during a pause = %v, want %q", err, want)
	}
	clk.Step(20 * time.Second)
	if err := g.Admit(governor.Reads, governor.Urgent); err != nil {
		t.Errorf("Admit at the pause's end = %v, want admitted", err)
	}
	if err := g.Admit(governor.Reads, governor.Urgent); err == nil || !strings.Contains(err.Error(), "the budget is spent; retry after 50ms") {
		t.Errorf("second Admit at the pause's end = %v, want refused: one token at the end, the next 1/20s later", err)
	}
}

func TestMetrics(t *testing.T) {
	clk := newClock()
	g := newGovernor(t, clk, governor.Options{Writes: governor.Limit{Rate: 1, Burst: 4, NormalReserve: 1, BackgroundReserve: 2}})
	before := readGovernor(t)
	admitted(g, governor.Writes, governor.Background, 3) // 2 admitted, 1 refused
	admitted(g, governor.Writes, governor.Urgent, 3)     // 2 admitted, 1 refused
	g.Observe(governor.Writes, throttled(4*time.Second))
	g.Observe(governor.Writes, throttled(3*time.Second)) // within the first: paused no longer
	after := readGovernor(t)
	want := map[string]float64{
		"admitted writes/background": 2, "refused writes/background": 1,
		"admitted writes/urgent": 2, "refused writes/urgent": 1,
		"pauses writes": 2, "paused_seconds writes": 4,
	}
	if diff := cmp.Diff(want, since(after, before)); diff != "" {
		t.Errorf("metrics recorded (-want +got):\n%s", diff)
	}
	if got := after["tokens writes"]; got != 0 {
		t.Errorf("ccmkit_governor_tokens{class=writes} = %v, want 0 while paused", got)
	}
	clk.Step(4 * time.Second)
	g.Admit(governor.Writes, governor.Background) // refused: 1 token
	if got := readGovernor(t)["tokens writes"]; got != 1 {
		t.Errorf("ccmkit_governor_tokens{class=writes} = %v, want 1 at the pause's end", got)
	}
}
