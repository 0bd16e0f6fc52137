package proc

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseUsage(t *testing.T) {
	status := "Name:\tcloud-controller\nVmHWM:\t   81920 kB\nVmRSS:\t   40960 kB\nThreads:\t12\n"
	// A command name with a space and a parenthesis, as a process may set.
	stat := "4242 (cloud (ctl) x) S 1 4242 4242 0 -1 4194560 9000 0 12 0 250 125 0 0 20 0 12 0 1000 0 0\n"
	u, err := parseUsage([]byte(status), []byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{RSS: 40960 * 1024, PeakRSS: 81920 * 1024, CPU: 3750 * time.Millisecond}
	if u != want {
		t.Errorf("parseUsage = %+v, want %+v", u, want)
	}
}

func TestParseUsageErrors(t *testing.T) {
	okStatus := "VmHWM:\t1 kB\nVmRSS:\t1 kB\n"
	okStat := "1 (x) S 1 1 1 0 -1 0 0 0 0 0 1 1 0\n"
	for _, c := range []struct{ name, status, stat, want string }{
		{"no VmHWM", "VmRSS:\t1 kB\n", okStat, "no VmRSS or no VmHWM"},
		{"not kB", "VmHWM:\t1 MB\nVmRSS:\t1 kB\n", okStat, `expected VmHWM: <n> kB`},
		{"not a number", "VmHWM:\tx kB\nVmRSS:\t1 kB\n", okStat, `expected VmHWM: <n> kB`},
		{"no command", okStatus, "1 x S", `expected "pid (comm) state ...`},
		{"short", okStatus, "1 (x) S 1 1\n", "expected at least 13"},
		{"bad utime", okStatus, "1 (x) S 1 1 1 0 -1 0 0 0 0 0 u 1 0\n", `"u": expected a number of clock ticks`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseUsage([]byte(c.status), []byte(c.stat))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("parseUsage: error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestReadUsageSelf reads the test binary's own usage: it is resident, its
// peak is at least what it holds now, and the CPU it spends shows (in
// clock ticks of 10 ms, so it spins until one has passed).
func TestReadUsageSelf(t *testing.T) {
	u, err := ReadUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS == 0 || u.PeakRSS < u.RSS {
		t.Errorf("ReadUsage(self) = %+v: want 0 < RSS ≤ PeakRSS", u)
	}
	before := u.CPU
	for deadline := time.Now().Add(10 * time.Second); u.CPU == before && time.Now().Before(deadline); {
		for i := 0; i < 1e6; i++ {
			sink += i
		}
		if u, err = ReadUsage(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	if u.CPU <= before {
		t.Errorf("ReadUsage(self).CPU stayed %v while the test spun for 10s", u.CPU)
	}
}

var sink int
