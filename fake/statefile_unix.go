//go:build unix

package fake

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

// funlock releases the lock taken by flock.
func funlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
