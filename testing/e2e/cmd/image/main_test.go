package main

import (
	"strings"
	"testing"
)

// TestRunRejectsBadFlags: every mistake is named before anything is built
// (the build itself is tested in package image).
func TestRunRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "neither -out nor -push"},
		{[]string{"-out", "x", "extra"}, `arguments ["extra"]: expected flags only`},
		{[]string{"-out", "x", "-platform", "linux"}, `-platform "linux": expected os/arch`},
		{[]string{"-out", "x", "-platform", "/amd64"}, `-platform "/amd64": expected os/arch`},
		{[]string{"-nosuchflag"}, "flag provided but not defined"},
	} {
		err := run(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v: want an error containing %q", tc.args, err, tc.want)
		}
	}
}
