package governor

import "time"

// bucket is the token bucket of one class, written as the generic cell
// rate algorithm: instead of a token count the caller keeps tat, the
// theoretical arrival time of the next call, which is exact in integer
// nanoseconds and needs no refill step. The bucket holds
// Burst - max(0, tat-now)/interval tokens at now: it is full when tat is
// not after now, each admitted call moves tat one interval on, and a pause
// moves it past the pause's end. A bucket is an immutable value; its
// methods are pure functions of their arguments.
type bucket struct {
	interval time.Duration // the time one token takes to refill: 1/Rate
	burst    int
	// limits are, by Priority, how far ahead of now tat may be for a call
	// of that priority to take a token: (Burst-1-reserve) intervals, so
	// that the bucket still holds at least its reserve once the token is
	// taken.
	limits [numPriorities]time.Duration
}

// newBucket returns the bucket of a validated Limit with its defaults
// filled in.
func newBucket(l Limit) bucket {
	b := bucket{interval: max(time.Duration(float64(time.Second)/l.Rate), 1), burst: l.Burst}
	for p, reserve := range [numPriorities]int{Urgent: 0, Normal: max(l.NormalReserve, 0), Background: max(l.BackgroundReserve, 0)} {
		b.limits[p] = time.Duration(l.Burst-1-reserve) * b.interval
	}
	return b
}

// take decides whether a call of priority p may take a token at now from
// the bucket whose theoretical arrival time is tat, by the rule of the
// package doc (Priorities): it may when, once the token is taken, the
// bucket still holds at least p's reserve. It returns the new tat and 0
// when the call may go, and tat unchanged with the positive time until it
// may when it may not.
func (b bucket) take(tat, now time.Time, p Priority) (time.Time, time.Duration) {
	if tat.Before(now) {
		tat = now // a full bucket: the tokens of an idle time are not kept
	}
	if ahead := tat.Sub(now); ahead > b.limits[p] {
		return tat, ahead - b.limits[p]
	}
	return tat.Add(b.interval), 0
}

// pause returns the tat of the bucket whose tat is tat after the cloud
// asked, at now, for no call before until: no call of any priority is
// admitted before until (an urgent call needs tat-now within limits[Urgent]),
// and at until the bucket holds at most one token, so calls resume at the
// class's rate, not in a burst, urgent ones first. A pause never shortens
// an earlier one.
func (b bucket) pause(tat, until time.Time) time.Time {
	if end := until.Add(b.limits[Urgent]); end.After(tat) {
		return end
	}
	return tat
}

// tokens returns how many tokens the bucket whose tat is tat holds at now:
// at most Burst, at least 0 (a paused bucket holds none).
func (b bucket) tokens(tat, now time.Time) float64 {
	ahead := max(tat.Sub(now), 0)
	return max(float64(b.burst)-float64(ahead)/float64(b.interval), 0)
}

// retryAfter is the RetryAfter of a refusal that must wait wait: rounded up
// to the millisecond, so that a caller that comes back after it finds its
// token and the refusal's message reads well.
func retryAfter(wait time.Duration) time.Duration {
	return (wait + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}
