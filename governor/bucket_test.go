package governor

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// testBucket refills a token every 100ms and holds 4: an urgent call may
// take any token, a normal one while 2 remain (reserve 1), a background
// one while 3 remain (reserve 2).
var testBucket = newBucket(Limit{Rate: 10, Burst: 4, NormalReserve: 1, BackgroundReserve: 2})

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestNewBucket(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limit  Limit
		want   bucket
		reason string
	}{
		{name: "reserves", limit: Limit{Rate: 10, Burst: 4, NormalReserve: 1, BackgroundReserve: 2},
			want:   bucket{interval: ms(100), burst: 4, limits: [numPriorities]time.Duration{ms(300), ms(200), ms(100)}},
			reason: "urgent may leave 0 tokens (3 intervals ahead), normal 1, background 2"},
		{name: "no reserves", limit: Limit{Rate: 4, Burst: 2, NormalReserve: -1, BackgroundReserve: -1},
			want:   bucket{interval: ms(250), burst: 2, limits: [numPriorities]time.Duration{ms(250), ms(250), ms(250)}},
			reason: "negative reserves are none: every priority may take any token"},
		{name: "fastest", limit: Limit{Rate: 1e12, Burst: 1, NormalReserve: -1, BackgroundReserve: -1},
			want:   bucket{interval: 1, burst: 1},
			reason: "an interval below a nanosecond is one nanosecond, never zero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, newBucket(tc.limit), cmp.AllowUnexported(bucket{})); diff != "" {
				t.Errorf("newBucket(%+v) (-want +got):\n%s\n%s", tc.limit, diff, tc.reason)
			}
		})
	}
}

func TestTake(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ahead    time.Duration // tat - now; the bucket holds 4 - ahead/100ms tokens
		priority Priority
		want     time.Duration // the new tat - now when admitted
		wait     time.Duration // when refused
		reason   string
	}{
		{name: "idle", ahead: -time.Hour, priority: Background, want: ms(100), reason: "a full bucket: the tokens of an idle hour are not kept beyond Burst"},
		{name: "background above its reserve", ahead: ms(100), priority: Background, want: ms(200), reason: "3 tokens: one taken leaves 2, the background reserve"},
		{name: "background at its reserve", ahead: ms(200), priority: Background, wait: ms(100), reason: "2 tokens: taking one would leave 1, below the reserve of 2; one interval later there are 3"},
		{name: "normal where background may not", ahead: ms(200), priority: Normal, want: ms(300), reason: "2 tokens: one taken leaves 1, the normal reserve"},
		{name: "normal at its reserve", ahead: ms(250), priority: Normal, wait: ms(50), reason: "1.5 tokens: half an interval until 2"},
		{name: "urgent takes the last token", ahead: ms(300), priority: Urgent, want: ms(400), reason: "1 token: urgent calls have no reserve"},
		{name: "urgent on an empty bucket", ahead: ms(400), priority: Urgent, wait: ms(100), reason: "0 tokens: one interval until the next"},
		{name: "urgent on part of a token", ahead: ms(350), priority: Urgent, wait: ms(50), reason: "half a token"},
		{name: "background on an empty bucket", ahead: ms(400), priority: Background, wait: ms(300), reason: "(reserve+1) intervals at most"},
		{name: "paused", ahead: 5*time.Second + ms(300), priority: Urgent, wait: 5 * time.Second, reason: "a pause of 5s (see TestPause): no call before its end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tat, wait := testBucket.take(t0.Add(tc.ahead), t0, tc.priority)
			if wait != tc.wait {
				t.Errorf("take(%v ahead, %v) waits %v, want %v: %s", tc.ahead, tc.priority, wait, tc.wait, tc.reason)
			}
			want := t0.Add(tc.want)
			if tc.wait > 0 {
				want = t0.Add(max(tc.ahead, 0)) // refused: unchanged
			}
			if !tat.Equal(want) {
				t.Errorf("take(%v ahead, %v) leaves tat now%+v, want now%+v: %s", tc.ahead, tc.priority, tat.Sub(t0), want.Sub(t0), tc.reason)
			}
		})
	}
}

func TestPause(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ahead  time.Duration // tat - now before the pause
		until  time.Duration // the pause's end - now
		want   time.Duration // tat - now after it
		reason string
	}{
		{name: "full bucket", ahead: 0, until: 5 * time.Second, want: 5*time.Second + ms(300), reason: "one token left at the pause's end: 3 intervals ahead"},
		{name: "empty bucket", ahead: ms(400), until: ms(50), want: ms(400), reason: "the bucket already holds less than one token at the pause's end: unchanged"},
		{name: "shorter than a pause in force", ahead: 10 * time.Second, until: 5 * time.Second, want: 10 * time.Second, reason: "a pause never shortens an earlier one"},
		{name: "longer than a pause in force", ahead: 5*time.Second + ms(300), until: 8 * time.Second, want: 8*time.Second + ms(300), reason: "a later Retry-After extends the pause"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := testBucket.pause(t0.Add(tc.ahead), t0.Add(tc.until))
			if d := got.Sub(t0); d != tc.want {
				t.Errorf("pause(%v ahead, until now+%v) = now+%v, want now+%v: %s", tc.ahead, tc.until, d, tc.want, tc.reason)
			}
		})
	}
}

// TestPauseResumes follows a pause to its end: nothing before it, then one
// token, urgent calls first, the lower priorities a reserve later.
func TestPauseResumes(t *testing.T) {
	until := t0.Add(5 * time.Second)
	tat := testBucket.pause(time.Time{}, until)
	for _, tc := range []struct {
		at       time.Time
		priority Priority
		wait     time.Duration
		reason   string
	}{
		{at: until.Add(-1), priority: Urgent, wait: 1, reason: "no call before the pause's end"},
		{at: until, priority: Normal, wait: ms(100), reason: "one token at the end: normal calls wait for the second"},
		{at: until, priority: Background, wait: ms(200), reason: "background calls wait for the third"},
		{at: until, priority: Urgent, wait: 0, reason: "an urgent call takes the one token at the end"},
	} {
		_, wait := testBucket.take(tat, tc.at, tc.priority)
		if wait != tc.wait {
			t.Errorf("%v call at pause end%+v waits %v, want %v: %s", tc.priority, tc.at.Sub(until), wait, tc.wait, tc.reason)
		}
	}
	if got := testBucket.tokens(tat, until); got != 1 {
		t.Errorf("tokens at the pause's end = %v, want 1", got)
	}
}

func TestTokens(t *testing.T) {
	for _, tc := range []struct {
		ahead time.Duration
		want  float64
	}{
		{ahead: -time.Minute, want: 4},
		{ahead: 0, want: 4},
		{ahead: ms(150), want: 2.5},
		{ahead: ms(400), want: 0},
		{ahead: time.Second, want: 0}, // paused: none, not negative
	} {
		if got := testBucket.tokens(t0.Add(tc.ahead), t0); got != tc.want {
			t.Errorf("tokens(%v ahead) = %v, want %v", tc.ahead, got, tc.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct{ wait, want time.Duration }{
		{wait: 1, want: time.Millisecond},
		{wait: time.Millisecond, want: time.Millisecond},
		{wait: time.Millisecond + 1, want: 2 * time.Millisecond},
		{wait: 33333333, want: 34 * time.Millisecond},
		{wait: 5 * time.Second, want: 5 * time.Second},
	} {
		if got := retryAfter(tc.wait); got != tc.want {
			t.Errorf("retryAfter(%v) = %v, want %v: rounded up to the millisecond, never 0", tc.wait, got, tc.want)
		}
	}
}

func TestApplyKind(t *testing.T) {
	for _, tc := range []struct {
		action loadbalancer.ActionKind
		want   kind
		reason string
	}{
		{action: loadbalancer.ActionCreate, want: kind{Writes, Urgent}, reason: "a new Service waits for its load balancer"},
		{action: loadbalancer.ActionAddBackends, want: kind{Writes, Background}, reason: "what the node sync sends"},
		{action: loadbalancer.ActionRemoveBackends, want: kind{Writes, Background}, reason: "what the node sync sends"},
		{action: loadbalancer.ActionUpdateListener, want: kind{Writes, Normal}, reason: "a change of a Service's spec"},
		{action: loadbalancer.ActionUpdateTags, want: kind{Writes, Normal}, reason: "adoption"},
		{action: loadbalancer.ActionUpdateHealthCheck, want: kind{Writes, Normal}, reason: "a change of a Service's spec"},
		{action: "SomethingNew", want: kind{Writes, Normal}, reason: "an action kind this package does not know is an ordinary write"},
	} {
		if got := applyKind(tc.action); got != tc.want {
			t.Errorf("applyKind(%s) = %+v, want %+v: %s", tc.action, got, tc.want, tc.reason)
		}
	}
}

func TestNames(t *testing.T) {
	got := []string{Reads.String(), Writes.String(), Class(9).String(), Urgent.String(), Normal.String(), Background.String(), Priority(7).String()}
	want := []string{"reads", "writes", "Class(9)", "urgent", "normal", "background", "Priority(7)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}
