//go:build !unix

package statefile

import (
	"errors"
	"os"
)

var errNoFlock = errors.New("Config.StateFile needs flock(2), which this platform lacks: expected Linux or another Unix")

func flock(*os.File) error            { return errNoFlock }
func tryFlock(*os.File) (bool, error) { return false, errNoFlock }
func funlock(*os.File) error          { return nil }
