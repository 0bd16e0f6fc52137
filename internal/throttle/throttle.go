// Package throttle holds ccmkit's one reading of its throttling convention:
// a Driver says "throttled, retry after D" by returning an error that wraps
// an *api.RetryError (k8s.io/cloud-provider/api). Every block that waits for
// or passes on such an error asks RetryAfter. It is internal: users see only
// the convention, documented on each Driver.
package throttle

import (
	"errors"
	"time"

	"k8s.io/cloud-provider/api"
)

// RetryAfter reports whether err says "throttled" (it wraps a non-nil
// *api.RetryError, found with errors.As) and the delay that error asks for.
func RetryAfter(err error) (time.Duration, bool) {
	var re *api.RetryError
	if errors.As(err, &re) && re != nil {
		return re.RetryAfter(), true
	}
	return 0, false
}
