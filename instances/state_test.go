package instances_test

import (
	"strings"
	"testing"

	"github.com/ccmkit/ccmkit/instances"
)

func TestStateText(t *testing.T) {
	for _, s := range []instances.State{instances.StateRunning, instances.StateStopped, instances.StateTerminated} {
		text, err := s.MarshalText()
		if err != nil {
			t.Fatalf("%v.MarshalText: %v", s, err)
		}
		var back instances.State
		if err := back.UnmarshalText(text); err != nil || back != s {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v: the text form must round-trip", text, back, err, s)
		}
	}
	for _, tc := range []struct {
		name, text, wantErr, reason string
	}{
		{name: "capitalised", text: "Running", wantErr: `state "Running": expected one of running, stopped, terminated`, reason: "as spelled, like every other cloud-config value"},
		{name: "unknown", text: "pending", wantErr: `state "pending": expected one of running, stopped, terminated`, reason: "a driver maps transitional states itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s instances.State
			err := s.UnmarshalText([]byte(tc.text))
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("UnmarshalText(%q) error = %v, want %q: %s", tc.text, err, tc.wantErr, tc.reason)
			}
		})
	}
	empty := instances.StateStopped
	if err := empty.UnmarshalText(nil); err != nil || empty != instances.StateRunning {
		t.Errorf(`UnmarshalText("") = %v, %v; want StateRunning (the zero value)`, empty, err)
	}
	if _, err := instances.State(7).MarshalText(); err == nil || !strings.Contains(err.Error(), "instances.State 7") {
		t.Errorf("State(7).MarshalText error = %v, want one naming the State", err)
	}
}
