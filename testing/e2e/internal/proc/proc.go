package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultGrace is how long Stop waits after SIGTERM before it sends SIGKILL
// when the caller passes a zero grace period.
const DefaultGrace = 10 * time.Second

// Config says what to start.
//
// The zero value is not usable: Path is required.
type Config struct {
	// Name is a short label used in errors ("etcd", "ccm-a"). Defaults to
	// the base name of Path.
	Name string
	// Path is the executable to run. Required.
	Path string
	// Args are the arguments, without the program name.
	Args []string
	// Env is the environment; nil inherits the parent's.
	Env []string
	// Dir is the working directory; empty means the parent's.
	Dir string
	// LogPath, when set, receives the child's stdout and stderr (appended,
	// created 0o644). When empty the output is discarded.
	LogPath string
}

// Process is a started child process.
//
// A Process is safe for concurrent use: Stop, Kill, Done and Exited may be
// called from any goroutine, any number of times.
type Process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	logFile *os.File

	stopOnce sync.Once
	stopErr  error
}

// Start starts the process described by cfg in a new process group with
// Pdeathsig set to SIGKILL and returns once it has been forked. The caller
// owns the process and must call Stop (or Kill) when done; a goroutine owned
// by the Process reaps the child when it exits.
//
// Errors: a missing Path, an unopenable LogPath, or the fork/exec error from
// os/exec (wrapped with %w).
func Start(cfg Config) (*Process, error) {
	if cfg.Path == "" {
		return nil, errors.New("proc: Config.Path is empty: want the path of an executable")
	}
	name := cfg.Name
	if name == "" {
		name = cfg.Path[strings.LastIndex(cfg.Path, "/")+1:]
	}
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Env = cfg.Env
	cmd.Dir = cfg.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var logFile *os.File
	if cfg.LogPath != "" {
		f, err := os.OpenFile(cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("proc: %s: opening log file: %w", name, err)
		}
		logFile = f
		cmd.Stdout = f
		cmd.Stderr = f
	}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("proc: starting %s (%s): %w", name, cfg.Path, err)
	}
	p := &Process{name: name, logPath: cfg.LogPath, cmd: cmd, done: make(chan struct{}), logFile: logFile}
	go func() {
		p.waitErr = cmd.Wait()
		if p.logFile != nil {
			p.logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// Name returns the label given in Config.Name (or derived from Path).
func (p *Process) Name() string { return p.name }

// PID returns the process ID, which is also its process group ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// LogPath returns Config.LogPath.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and if so the error from
// exec.Cmd.Wait (nil for a zero exit status).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, waits up to grace (DefaultGrace
// when zero) for the leader to exit, then sends SIGKILL to the group and
// waits for the leader to be reaped. After Stop returns no process of the
// group is left (a SIGKILL is also sent to the group when the leader exited
// on its own, to catch grandchildren). Stop is idempotent; later calls return
// the first call's result.
//
// It returns an error only if the group could not be signalled for a reason
// other than "no such process"; the child's own exit status is not an error
// here (see Exited).
func (p *Process) Stop(grace time.Duration) error {
	p.stopOnce.Do(func() { p.stopErr = p.stop(grace) })
	return p.stopErr
}

// Kill is Stop with no grace period: the group gets SIGKILL at once, as when
// a machine loses power. Use it to simulate a crash.
func (p *Process) Kill() error {
	p.stopOnce.Do(func() { p.stopErr = p.stop(-1) })
	return p.stopErr
}

func (p *Process) stop(grace time.Duration) error {
	if grace == 0 {
		grace = DefaultGrace
	}
	pgid := p.PID()
	var errs []error
	if grace > 0 {
		if err := signalGroup(pgid, syscall.SIGTERM); err != nil {
			errs = append(errs, err)
		}
		select {
		case <-p.done:
		case <-time.After(grace):
		}
	}
	if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
		errs = append(errs, err)
	}
	<-p.done
	// The leader is reaped; wait for other members of the group (if any)
	// to die so that the caller's "nothing left" check holds. Dead members
	// reparented to init may stay zombies until it reaps them; they do not
	// count.
	deadline := time.Now().Add(5 * time.Second)
	for GroupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if GroupAlive(pgid) {
		errs = append(errs, fmt.Errorf("proc: %s: process group %d still has members 5s after SIGKILL", p.name, pgid))
	}
	return errors.Join(errs...)
}

func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return fmt.Errorf("proc: sending %v to process group %d: %w", sig, pgid, err)
}

// Alive reports whether the process pid is running: it exists and is not a
// zombie (a zombie is dead, waiting for a parent to reap it). It reads
// /proc/<pid>/stat, falling back to kill(pid, 0) when /proc is not there.
func Alive(pid int) bool {
	state, _, err := stat(pid)
	if err == nil {
		return state != 'Z'
	}
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat("/proc/self/stat"); err == nil {
			return false // /proc works and pid is not in it
		}
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// GroupAlive reports whether any process of the process group pgid is
// running (not a zombie). It scans /proc, falling back to kill(-pgid, 0)
// (which also counts zombies) when /proc is not there.
func GroupAlive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		err = syscall.Kill(-pgid, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pg, err := stat(pid)
		if err == nil && pg == pgid && state != 'Z' {
			return true
		}
	}
	return false
}

// stat returns the state letter and the process group of pid from
// /proc/<pid>/stat ("pid (comm) S ppid pgrp ...", where comm may hold
// spaces and parentheses, so parsing starts after the last ')').
func stat(pid int) (state byte, pgrp int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("proc: malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 3 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("proc: malformed /proc/%d/stat", pid)
	}
	pgrp, err = strconv.Atoi(fields[2])
	if err != nil {
		return 0, 0, fmt.Errorf("proc: malformed /proc/%d/stat: %w", pid, err)
	}
	return fields[0][0], pgrp, nil
}

// LogTail returns the last n lines of the process's log file, or a note
// saying why it cannot. It is meant for failure messages.
func (p *Process) LogTail(n int) string {
	return Tail(p.logPath, n)
}

// Tail returns the last n lines of the file at path, or a note saying why it
// cannot be read. It is meant for failure messages.
func Tail(path string, n int) string {
	if path == "" {
		return "(no log file)"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
