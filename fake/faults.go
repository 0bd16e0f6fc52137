package fake

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/cloud-provider/api"
)

// ErrInjected is wrapped by the error of a fault added with AddFault (the
// admin endpoint's POST /faults) that has no Err of its own, with the
// operation.
var ErrInjected = errors.New("fake: injected fault")

// Fault is one fault of a Cloud's fault script (AddFault; the admin
// endpoint's POST /faults): the next Times calls of Op fail.
type Fault struct {
	// Op is the operation to fail; "" means every operation.
	Op Op
	// Times is how many matching calls fail: a positive number, or -1 for
	// every call until ClearFaults (an outage). Required.
	Times int
	// Err is returned, unchanged, by each failing call; nil means an error
	// wrapping ErrInjected. Ignored when RetryAfter is set.
	Err error
	// RetryAfter, when positive, makes the fault a throttle: each failing
	// call returns an *api.RetryError with this delay. 0 means none;
	// negative is an error.
	RetryAfter time.Duration
	// LostResponse makes a failing write take effect before it fails, as
	// when the cloud did the work but its answer never reached the caller.
	// A failing read fails as without it.
	LostResponse bool
}

// AddFault appends f to the Cloud's fault script, matched in the order the
// faults were added: each failing call consumes one use of the first
// matching fault. The script runs in front of the interceptor Funcs, and
// its failures are counted in Calls.Faults. It returns an error naming the
// field for an unknown Op, a Times that is neither positive nor -1, or a
// negative RetryAfter, and then adds nothing. Safe for concurrent use.
func (c *Cloud) AddFault(f Fault) error { return c.meter.script.add(f) }

// ClearFaults removes every fault of the script and drops the instance and
// load-balancer caches, with their memory of a failed list, so that the
// provider sees the end of an outage at its next look-up. Safe for
// concurrent use.
func (c *Cloud) ClearFaults() {
	c.meter.script.clear()
	c.dropCaches()
}

// faultScript is a Cloud's list of faults (AddFault). It is safe for
// concurrent use.
type faultScript struct {
	mu     sync.Mutex
	faults []*Fault // Times > 0 or -1
}

// add appends f after checking it (see AddFault).
func (s *faultScript) add(f Fault) error {
	switch {
	case f.Op != "" && !f.Op.valid():
		return fmt.Errorf("fake: op %q: expected \"\" or one of %v", f.Op, ops)
	case f.Times == 0 || f.Times < -1:
		return fmt.Errorf("fake: times %d: expected a positive count, or -1 for every call", f.Times)
	case f.RetryAfter < 0:
		return fmt.Errorf("fake: retryAfter %v: expected zero or positive", f.RetryAfter)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
	return nil
}

// clear removes every fault.
func (s *faultScript) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// take returns the error of the next fault for a call of op, if any, and
// whether it comes after the call took effect (LostResponse).
func (s *faultScript) take(op Op) (error, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.Op != "" && f.Op != op {
			continue
		}
		if f.Times > 0 {
			if f.Times--; f.Times == 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
		}
		switch {
		case f.RetryAfter > 0:
			return api.NewRetryError(fmt.Sprintf("fake: %s throttled, retry after %v", op, f.RetryAfter), f.RetryAfter), f.LostResponse
		case f.Err != nil:
			return f.Err, f.LostResponse
		default:
			return fmt.Errorf("%w: %s", ErrInjected, op), f.LostResponse
		}
	}
	return nil, false
}
