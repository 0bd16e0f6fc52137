package fake

import "errors"

// The kinds of the control surface's errors: every error of a
// control-surface method (and of the cloud API calls, where they apply)
// about its input or the cloud's state wraps one of them, so that a caller
// such as the admin endpoint (package fake/admin) can branch with
// errors.Is without knowing each error. A load balancer that does not
// exist is loadbalancer.ErrNotFound instead; a state file error wraps
// ErrStateFile.
var (
	// ErrInvalid: input the caller can fix (an instance, load balancer,
	// listener or backend with invalid fields). The error names each
	// field, its value and what was expected.
	ErrInvalid = errors.New("fake: invalid input")
	// ErrNotFound: the instance, listener, backend or backend pool named
	// by the call does not exist.
	ErrNotFound = errors.New("fake: not found")
	// ErrConflict: the cloud's state refuses the change: an instance ID
	// taken, a terminated instance started or stopped, an address pool
	// with no free address.
	ErrConflict = errors.New("fake: conflict with the cloud's state")
)

// kindError is a sentinel of the fake with its kind (ErrInvalid,
// ErrNotFound or ErrConflict): errors.Is finds both.
type kindError struct {
	msg  string
	kind error
}

// kindOf returns a sentinel whose message is msg, of kind.
func kindOf(kind error, msg string) error { return &kindError{msg: msg, kind: kind} }

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }
