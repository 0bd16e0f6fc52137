package cloudmetrics

import (
	"context"
	"maps"
	"sync"
)

// A Tally counts the cloud calls made on behalf of one piece of work (one
// drift repair of a Service, package housekeeping), for the controller
// that does the work to pace, log and report them. Meter adds to the
// Tally of its context every call it records: the calls a cache answered
// from its list are not counted, the List the cache made for them is,
// once, in the Tally of the call that started it.

// tallyKey is the context key of the *Tally.
type tallyKey struct{}

// Tally counts cloud calls by operation. Safe for concurrent use.
type Tally struct {
	mu    sync.Mutex
	calls map[string]int // operation → calls
}

// StartTally returns a context whose metered calls (Meter) are counted in
// the returned Tally, and the Tally. A Tally already in ctx is replaced
// for the calls made with the new context.
func StartTally(ctx context.Context) (context.Context, *Tally) {
	t := &Tally{calls: map[string]int{}}
	return context.WithValue(ctx, tallyKey{}, t), t
}

// count adds one call of operation to the Tally of ctx, if any.
func count(ctx context.Context, operation string) {
	t, ok := ctx.Value(tallyKey{}).(*Tally)
	if !ok {
		return
	}
	t.mu.Lock()
	t.calls[operation]++
	t.mu.Unlock()
}

// Calls returns the calls counted so far, by operation (a new map).
func (t *Tally) Calls() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.calls)
}

// Total returns how many calls were counted so far.
func (t *Tally) Total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.calls {
		n += c
	}
	return n
}

// Writes returns how many of the calls counted so far change the cloud
// (IsWrite).
func (t *Tally) Writes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for op, c := range t.calls {
		if IsWrite(op) {
			n += c
		}
	}
	return n
}

// writeOperations are the Driver methods, as the blocks meter them, that
// change the cloud.
var writeOperations = map[string]bool{
	"Apply": true, "Delete": true, "ApplyPool": true, "DeletePool": true,
	"CreateRoute": true, "DeleteRoute": true, "WriteTable": true,
}

// IsWrite reports whether operation, a Driver method as the blocks meter
// it, changes the cloud.
func IsWrite(operation string) bool { return writeOperations[operation] }
