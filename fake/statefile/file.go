package statefile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ccmkit/ccmkit/fake"
)

// File is a state file and its lock file (<path>.lock): the
// fake.Persistence of one Cloud (and its peers) over Config.StateFile. Its
// Load and Save run with its lock held (fake.Persistence), and Lock
// serializes its own callers (gate), so it needs no lock of its own.
//
// Change detection: the state file is only ever replaced (a new file
// renamed over it), never written in place, and the file last loaded or
// saved stays open (cur), so its inode cannot be reused by a later file.
// The path therefore still names the same inode exactly when no process
// saved since; size and modification time are compared too, to notice a
// file edited in place by hand.
type File struct {
	path  string
	lockf *os.File // open for the File's life (closed by its finalizer)
	// gate (capacity 1) is held for the whole of each transaction (from
	// Lock to unlock); it guards the fields below.
	gate chan struct{}

	cur        *os.File    // the file last loaded or saved; nil before the first
	info       fs.FileInfo // cur's stat at that moment
	generation uint64      // cur's generation
	stale      bool        // a save failed: reload even if the file is the same
}

// Open opens (creating it if needed) the lock file of the state file
// path, an absolute path (fake.Config.StateFile; any other is an error). The state file itself is
// read at the first Load, and created by the first Save. Its errors wrap
// fake.ErrStateFile and name the file. Two Files opened on one path, in
// one process or two, are two processes sharing the file: each Lock
// excludes the other.
func Open(path string) (*File, error) {
	f := &File{path: path, gate: make(chan struct{}, 1)}
	if !filepath.IsAbs(path) {
		return nil, f.errorf("expected the absolute path of a state file (fake.Config.StateFile)")
	}
	lockPath := path + ".lock"
	var err error
	if f.lockf, err = os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600); err != nil { //nolint:gosec // G304: the state file's path is the fake cloud's own configuration (fake.Config.StateFile), checked absolute above
		return nil, f.errorf("opening the lock file: %w", err)
	}
	return f, nil
}

func (f *File) errorf(format string, args ...any) error {
	return fmt.Errorf("%w %s: %w", fake.ErrStateFile, f.path, fmt.Errorf(format, args...))
}

// Lock implements fake.Persistence: it takes the File's turn (one
// transaction of its callers at a time: the file lock belongs to the one
// open lock file, so it cannot serialize them, and a caller waiting for it
// must not hold the fake's locks, or a caller with an earlier deadline
// could not give up), then the file lock (lockFile), each waiting at most
// until ctx is done. Errors wrap fake.ErrStateFile, and ctx.Err() when ctx
// ended first.
func (f *File) Lock(ctx context.Context) (func(), error) {
	leave, err := f.enter(ctx)
	if err != nil {
		return nil, err
	}
	unlock, err := f.lockFile(ctx)
	if err != nil {
		leave()
		return nil, err
	}
	return func() { unlock(); leave() }, nil
}

// enter takes the File's turn, waiting at most until ctx is done, and
// returns the function that gives it back.
func (f *File) enter(ctx context.Context) (func(), error) {
	leave := func() { <-f.gate }
	select {
	case f.gate <- struct{}{}:
		return leave, nil
	default:
	}
	select {
	case f.gate <- struct{}{}:
		if ctx.Err() == nil {
			return leave, nil
		}
		leave() // both were ready: ctx wins
	case <-ctx.Done():
	}
	return nil, f.errorf("waiting for another operation of this process on the state file: %w", ctx.Err())
}

// Polling of a held lock file by lock: the first retry after
// lockPollMin, each next one after twice the previous wait, at most
// lockPollMax.
const (
	lockPollMin = time.Millisecond
	lockPollMax = 16 * time.Millisecond
)

// lockFile takes the exclusive lock on the lock file (flock: held by this open
// file, released when it is unlocked or the process dies) and returns the
// function that releases it. While another process (or another File of
// this process) holds it, lockFile waits until ctx is done: with a ctx that is
// never done, in flock(2) itself; otherwise by retrying a non-blocking
// flock, so that no goroutine is left waiting, or holding the lock, after
// lockFile returns. A lock that is free is taken even when ctx is done. Errors
// wrap ErrStateFile, and ctx.Err() when ctx ended first.
func (f *File) lockFile(ctx context.Context) (func(), error) {
	unlock := func() { _ = funlock(f.lockf) }
	if ctx.Done() == nil {
		if err := flock(f.lockf); err != nil {
			return nil, f.errorf("locking %s: %w", f.lockf.Name(), err)
		}
		return unlock, nil
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for wait := lockPollMin; ; wait = min(2*wait, lockPollMax) {
		if wait > lockPollMin && ctx.Err() != nil {
			// The timer and ctx may have been ready together: ctx wins,
			// so nothing runs after the caller's deadline.
			return nil, f.errorf("waiting for the lock %s, which another process or Cloud holds: %w", f.lockf.Name(), ctx.Err())
		}
		ok, err := tryFlock(f.lockf)
		switch {
		case err != nil:
			return nil, f.errorf("locking %s: %w", f.lockf.Name(), err)
		case ok:
			return unlock, nil
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return nil, f.errorf("waiting for the lock %s, which another process or Cloud holds: %w", f.lockf.Name(), ctx.Err())
		case <-timer.C:
		}
	}
}

// Load implements fake.Persistence: it reads the file if it changed since
// it was last loaded or saved and calls restore with its state; it returns
// false when it did not change, or when it does not exist and was never
// loaded (a cloud not created yet). A file that is not a state file of
// this format (decode), or whose state restore refuses, is an error
// wrapping fake.ErrStateFile naming the file and the problem, and is not
// taken as loaded. The lock must be held.
func (f *File) Load(restore func(*fake.SavedState) error) (bool, error) {
	fi, err := os.Stat(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && f.cur == nil:
		return false, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, f.errorf("removed after it was loaded (the fake never recreates a shared cloud): %w", err)
	case err != nil:
		return false, f.errorf("%w", err)
	}
	if f.cur != nil && !f.stale && os.SameFile(fi, f.info) && fi.Size() == f.info.Size() && fi.ModTime().Equal(f.info.ModTime()) {
		return false, nil
	}
	file, err := os.Open(f.path)
	if err != nil {
		return false, f.errorf("%w", err)
	}
	data, err := io.ReadAll(file)
	if err == nil {
		fi, err = file.Stat()
	}
	if err != nil {
		file.Close()
		return false, f.errorf("reading: %w", err)
	}
	st, gen, err := decodeState(data)
	if err == nil {
		err = restore(st)
	}
	if err != nil {
		file.Close()
		return false, f.errorf("%w", err)
	}
	f.replace(file, fi, gen)
	return true, nil
}

// replace makes file, with stat fi and generation gen, the current file.
func (f *File) replace(file *os.File, fi fs.FileInfo, gen uint64) {
	if f.cur != nil {
		f.cur.Close()
	}
	f.cur, f.info, f.generation, f.stale = file, fi, gen, false
}

// Save implements fake.Persistence: it writes st as the next generation: a temporary file in the same
// directory, renamed over the state file, so a reader (or a process killed
// mid-write) never sees a partial file. It does not fsync: the file
// survives the death of any process, not a crash of the machine. The lock
// must be held.
func (f *File) Save(st *fake.SavedState) (err error) {
	defer func() {
		if err != nil {
			f.stale = true // memory holds a change the file does not
		}
	}()
	data, err := json.MarshalIndent(encodeState(st, f.generation+1), "", "  ")
	if err != nil {
		return f.errorf("encoding: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), "."+filepath.Base(f.path)+".tmp-*")
	if err != nil {
		return f.errorf("writing: %w", err)
	}
	_, err = tmp.Write(append(data, '\n'))
	var fi fs.FileInfo
	if err == nil {
		fi, err = tmp.Stat()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return f.errorf("writing: %w", err)
	}
	f.replace(tmp, fi, f.generation+1)
	return nil
}

var _ fake.Persistence = (*File)(nil)
