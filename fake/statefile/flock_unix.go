//go:build unix

package statefile

import (
	"errors"
	"os"
	"syscall"
)

// flock takes an exclusive flock(2) on f, waiting for it. The lock belongs
// to f's open file description: another open of the same file, in this
// process or another, waits; the kernel releases it when the process dies.
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// tryFlock is flock without waiting: it reports false, and no error, when
// another open file description holds the lock.
func tryFlock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case !errors.Is(err, syscall.EINTR):
			return false, err
		}
	}
}

// funlock releases the lock taken by flock or tryFlock.
func funlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
