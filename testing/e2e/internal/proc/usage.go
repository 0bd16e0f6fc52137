package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Usage is what a running process has used so far, read from Linux's
// /proc/<pid>/status and /proc/<pid>/stat (proc(5)).
type Usage struct {
	// RSS is the resident set size now (VmRSS), in bytes.
	RSS uint64
	// PeakRSS is the largest resident set size so far (VmHWM), in bytes.
	PeakRSS uint64
	// CPU is the user and system CPU time so far (stat fields 14 and 15,
	// utime and stime).
	CPU time.Duration
}

// userHZ is the unit of /proc/<pid>/stat's utime and stime: USER_HZ, which
// Linux fixes at 100 on every architecture the e2e suite runs on (see
// proc(5): "clock ticks (divide by sysconf(_SC_CLK_TCK))").
const userHZ = 100

// Usage reads the process's Usage, or returns an error once it has exited.
func (p *Process) Usage() (Usage, error) { return ReadUsage(p.PID()) }

// ReadUsage reads the Usage of the process pid.
func ReadUsage(pid int) (Usage, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, err
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, err
	}
	return parseUsage(status, stat)
}

// parseUsage parses the contents of /proc/<pid>/status and /proc/<pid>/stat.
func parseUsage(status, stat []byte) (Usage, error) {
	var u Usage
	var haveRSS, havePeak bool
	for line := range strings.SplitSeq(string(status), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, ok := strings.CutSuffix(strings.TrimSpace(value), " kB")
		n, err := strconv.ParseUint(kb, 10, 64)
		if !ok || err != nil {
			return Usage{}, fmt.Errorf("proc: status line %q: expected %s: <n> kB", line, key)
		}
		if key == "VmRSS" {
			u.RSS, haveRSS = n*1024, true
		} else {
			u.PeakRSS, havePeak = n*1024, true
		}
	}
	if !haveRSS || !havePeak {
		return Usage{}, fmt.Errorf("proc: status has no VmRSS or no VmHWM line: expected both (is the process a zombie?)")
	}
	// The command name, field 2, is in parentheses and may hold spaces and
	// parentheses itself: the fields after it start after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return Usage{}, fmt.Errorf("proc: stat %q: expected \"pid (comm) state ...\"", stat)
	}
	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is field 3 (state), so utime (14) and stime (15) are
	// fields[11] and fields[12].
	if len(fields) < 13 {
		return Usage{}, fmt.Errorf("proc: stat has %d fields after the command name: expected at least 13", len(fields))
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return Usage{}, fmt.Errorf("proc: stat utime or stime %q: expected a number of clock ticks", f)
		}
		ticks += n
	}
	u.CPU = time.Duration(ticks) * time.Second / userHZ //nolint:gosec // G115: CPU ticks of a test's process; overflow needs years of CPU time
	return u, nil
}
