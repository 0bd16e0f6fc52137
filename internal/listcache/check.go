package listcache

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// CheckInconsistent is for the tests of the blocks that return
// Inconsistent's errors: it returns nil when err wraps ErrInconsistent,
// not notFound (an inconsistent list is never "gone"), and quotes every
// one of names; otherwise an error saying what is missing.
func CheckInconsistent(err, notFound error, names ...string) error {
	if !errors.Is(err, ErrInconsistent) || errors.Is(err, notFound) {
		return fmt.Errorf("error %v: expected one wrapping ErrInconsistent and not %v", err, notFound) //nolint:errorlint // describes err, which may be nil, and must not pass for it in errors.Is
	}
	var missing []string
	for _, n := range names {
		if !strings.Contains(err.Error(), strconv.Quote(n)) {
			missing = append(missing, strconv.Quote(n))
		}
	}
	if missing != nil {
		return fmt.Errorf("error %q does not quote %s: expected every name quoted", err, strings.Join(missing, ", ")) //nolint:errorlint // quotes err's text on purpose, and must not pass for it in errors.Is
	}
	return nil
}
