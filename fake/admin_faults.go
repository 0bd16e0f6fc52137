package fake

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/cloud-provider/api"
)

// errInjected is wrapped by the error of a fault injected through the
// admin endpoint, with the operation and the request's "error" text.
var errInjected = errors.New("fake: injected fault")

// fault is one fault of the admin endpoint's script (POST /faults): the
// next Times calls of Op fail.
type fault struct {
	// Op is the operation to fail; "" means every operation.
	Op Op
	// Times is how many matching calls fail: a positive number, or -1 for
	// every call until DELETE /faults (an outage).
	Times int
	// Err is returned, unchanged, by each failing call; nil means an error
	// wrapping errInjected. Ignored when RetryAfter is set.
	Err error
	// RetryAfter, when positive, makes the fault a throttle: each failing
	// call returns an *api.RetryError with this delay.
	RetryAfter time.Duration
	// LostResponse makes a failing write take effect before it fails, as
	// when the cloud did the work but its answer never reached the caller.
	// A failing read fails as without it.
	LostResponse bool
}

// faultScript is the admin endpoint's list of faults, matched in the order
// they were added; each failing call consumes one use of the first
// matching fault. It is safe for concurrent use.
type faultScript struct {
	mu     sync.Mutex
	faults []*fault // Times > 0 or -1
}

// add appends f after checking it: an error names the field for an
// unknown Op, a Times that is neither positive nor -1, or a negative
// RetryAfter.
func (s *faultScript) add(f fault) error {
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
			return fmt.Errorf("%w: %s", errInjected, op), f.LostResponse
		}
	}
	return nil, false
}

// faultRequest is the body of POST /faults.
type faultRequest struct {
	Op           Op     `json:"op"`
	Times        int    `json:"times"`
	Error        string `json:"error"`
	RetryAfter   string `json:"retryAfter"`
	LostResponse bool   `json:"lostResponse"`
}

func (req faultRequest) fault() (fault, error) {
	f := fault{Op: req.Op, Times: req.Times, LostResponse: req.LostResponse}
	if req.Error != "" {
		f.Err = fmt.Errorf("%w: %s", errInjected, req.Error)
	}
	if req.RetryAfter != "" {
		d, err := time.ParseDuration(req.RetryAfter)
		if err != nil || d <= 0 {
			return fault{}, fmt.Errorf("retryAfter %q: expected a positive Go duration such as \"5s\"", req.RetryAfter)
		}
		f.RetryAfter = d
	}
	return f, nil
}
