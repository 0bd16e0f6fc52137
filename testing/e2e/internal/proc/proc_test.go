package proc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a parent that starts a grandchild
// through Start, prints the grandchild's PID and then sleeps, so that the
// Pdeathsig test can kill the parent and watch the grandchild die.
const helperEnv = "CCMKIT_PROC_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "parent" {
		p, err := Start(Config{Name: "grandchild", Path: "/bin/sleep", Args: []string{"300"}})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(p.PID())
		time.Sleep(5 * time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func waitGone(t *testing.T, what string, alive func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive() {
		if time.Now().After(deadline) {
			t.Fatalf("%s still alive 10s after it should have died", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStopKillsWholeGroup(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		script string
		grace  time.Duration
		kill   bool
	}{
		{
			name:   "obeys SIGTERM",
			reason: "a child that exits on SIGTERM is stopped within the grace period",
			script: "sleep 300 & wait",
			grace:  5 * time.Second,
		},
		{
			name:   "ignores SIGTERM",
			reason: "a child that ignores SIGTERM gets SIGKILL after the grace period, grandchildren included",
			script: "trap '' TERM; sleep 300 & sleep 300 & wait",
			grace:  200 * time.Millisecond,
		},
		{
			name:   "kill",
			reason: "Kill sends SIGKILL to the group at once",
			script: "trap '' TERM; sleep 300 & wait",
			kill:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "log")
			p, err := Start(Config{Path: "/bin/sh", Args: []string{"-c", "echo started; " + tt.script}, LogPath: log})
			if err != nil {
				t.Fatal(err)
			}
			// Wait until the shell has run, so the grandchildren exist.
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(Tail(log, 5), "started") {
				if time.Now().After(deadline) {
					t.Fatalf("%s: child never wrote to its log; log: %s", tt.reason, Tail(log, 5))
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			if tt.kill {
				err = p.Kill()
			} else {
				err = p.Stop(tt.grace)
			}
			if err != nil {
				t.Fatalf("%s: stop: %v", tt.reason, err)
			}
			if exited, _ := p.Exited(); !exited {
				t.Errorf("%s: Exited() = false after Stop", tt.reason)
			}
			if Alive(p.PID()) {
				t.Errorf("%s: PID %d alive after Stop", tt.reason, p.PID())
			}
			if GroupAlive(p.PID()) {
				t.Errorf("%s: process group %d has members after Stop", tt.reason, p.PID())
			}
			if err := p.Stop(0); err != nil {
				t.Errorf("second Stop: %v, want nil (idempotent)", err)
			}
		})
	}
}

func TestChildDiesWithParent(t *testing.T) {
	// The parent is this test binary in helper mode; it starts a sleep
	// through Start and prints its PID. Killing the parent with SIGKILL must
	// kill the grandchild through Pdeathsig, without any Stop call.
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), helperEnv+"=parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { parent.Process.Kill(); parent.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading grandchild PID from helper: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("helper printed %q, want a PID", line)
	}
	if !Alive(pid) {
		t.Fatalf("grandchild %d not alive before the parent is killed", pid)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	parent.Wait()
	// The grandchild is reparented and reaped by init (or a subreaper)
	// once it dies; wait for it to disappear.
	waitGone(t, fmt.Sprintf("grandchild %d of a SIGKILLed parent", pid), func() bool { return Alive(pid) })
}

func TestStartErrors(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		cfg    Config
		want   string
	}{
		{name: "no path", reason: "Path is required", cfg: Config{}, want: "Config.Path is empty"},
		{name: "missing binary", reason: "exec errors are returned", cfg: Config{Path: "/nonexistent/bin"}, want: "starting bin (/nonexistent/bin)"},
		{name: "bad log path", reason: "log file errors are returned", cfg: Config{Path: "/bin/true", LogPath: "/nonexistent/dir/log"}, want: "opening log file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Start(tt.cfg)
			if err == nil {
				p.Kill()
				t.Fatalf("%s: Start succeeded, want error containing %q", tt.reason, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: error %q does not contain %q", tt.reason, err, tt.want)
			}
		})
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("a\nb\nc\nd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := Tail(path, 2), "c\nd"; got != want {
		t.Errorf("Tail(2) = %q, want %q", got, want)
	}
	if got, want := Tail(path, 10), "a\nb\nc\nd"; got != want {
		t.Errorf("Tail(10) = %q, want %q", got, want)
	}
	if got := Tail(filepath.Join(t.TempDir(), "missing"), 2); !strings.Contains(got, "cannot read") {
		t.Errorf("Tail(missing) = %q, want a 'cannot read' note", got)
	}
}

func TestAliveSelfAndGone(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Errorf("Alive(own pid %d) = false", os.Getpid())
	}
	if !GroupAlive(syscall.Getpgrp()) {
		t.Errorf("GroupAlive(own group %d) = false", syscall.Getpgrp())
	}
	// A child that exited but is not reaped yet is a zombie: dead.
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	waitGone(t, fmt.Sprintf("exited, unreaped child %d", pid), func() bool { return Alive(pid) })
	cmd.Wait()
	if Alive(pid) {
		t.Errorf("Alive(%d) = true after the child was reaped", pid)
	}
}
