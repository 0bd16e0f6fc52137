package provider

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type durationConfig struct {
	Delay  Duration            `json:"delay,omitempty"`
	Steps  []Duration          `json:"steps,omitempty"`
	ByName map[string]Duration `json:"byName,omitempty"`
	Nested struct {
		Wait *Duration `json:"wait,omitempty"`
	} `json:"nested,omitempty"`
}

func TestDurationDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     time.Duration // of Delay
		wantErr  string        // substring; "" means success
		hidden   string        // a value the error must not quote (DecodeConfig never does)
		reason   string
	}{
		{name: "seconds", in: "delay: 5s", want: 5 * time.Second, reason: "the common form"},
		{name: "compound", in: `{"delay": "1m30s"}`, want: 90 * time.Second, reason: "JSON is YAML"},
		{name: "zero", in: "delay: 0s", want: 0, reason: "zero is the unset value, valid"},
		{name: "negative", in: "delay: -1s", want: -time.Second, reason: "the sign is for Validate to judge, naming its field"},
		{name: "absent", in: "{}", want: 0, reason: "absent is zero"},
		{name: "bare number", in: "delay: 5", wantErr: `delay: got a number: expected a duration, a string of a number with a unit (ns, us, ms, s, m, h), such as "5s" or "1m30s"`, reason: "5 what? never a silent unit"},
		{name: "quoted number", in: "delay: '5'", wantErr: `delay: malformed duration: expected a number with a unit (ns, us, ms, s, m, h), such as "5s" or "1m30s"`, reason: "time.ParseDuration needs a unit"},
		{name: "bad unit", in: "delay: 5x", wantErr: `delay: malformed duration: expected`, hidden: "5x", reason: "unknown unit"},
		{name: "list", in: "delay: [1]", wantErr: `delay: got a sequence: expected a duration`, reason: "not a scalar"},
		{name: "mapping", in: "delay: {a: 1}", wantErr: `delay: got a mapping: expected a duration`, reason: "not a scalar"},
		{name: "boolean", in: "delay: true", wantErr: `delay: got a boolean: expected a duration`, reason: "not a scalar"},
		{name: "in a list", in: "steps: [1s, nope]", wantErr: `steps[1]: malformed duration`, hidden: "nope", reason: "the path names the element"},
		{name: "in a map", in: "byName: {a: 1h, b: soon}", wantErr: `byName[b]: malformed duration`, hidden: "soon", reason: "the path names the key"},
		{name: "through a pointer", in: "nested: {wait: later}", wantErr: `nested.wait: malformed duration`, hidden: "later", reason: "nested fields are named with their path"},
		{name: "secret in a duration", in: "delay: " + fuzzSecret, wantErr: `delay: malformed duration: expected`, hidden: fuzzSecret, reason: "DecodeConfig never quotes a value: a credential written in the wrong field stays out of the error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeConfig[durationConfig](strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("DecodeConfig(%q) error = %v; want one containing %q and wrapping ErrInvalidConfig (%s)", tc.in, err, tc.wantErr, tc.reason)
				}
				if tc.hidden != "" && strings.Contains(err.Error(), tc.hidden) {
					t.Errorf("DecodeConfig(%q) error = %v; it quotes the value %q (%s)", tc.in, err, tc.hidden, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeConfig(%q): %v (%s)", tc.in, err, tc.reason)
			}
			if diff := cmp.Diff(tc.want, got.Delay.Duration); diff != "" {
				t.Errorf("DecodeConfig(%q).Delay (-want +got):\n%s\n(%s)", tc.in, diff, tc.reason)
			}
		})
	}
}

func TestDurationRoundTrip(t *testing.T) {
	in := Duration{90 * time.Second}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `"1m30s"` {
		t.Errorf("json.Marshal(%v) = %s; want \"1m30s\"", in, b)
	}
	var out Duration
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Errorf("json.Unmarshal(%s) = %v, %v; want %v", b, out, err, in)
	}
	before := Duration{time.Second}
	if err := before.UnmarshalJSON([]byte(`"x"`)); err == nil || before.Duration != time.Second {
		t.Errorf("UnmarshalJSON(\"x\") = %v and left %v; want an error and the value unchanged", err, before)
	}
}
