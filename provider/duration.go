package provider

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ccmkit/ccmkit/internal/clip"
)

// Duration is a time.Duration in a cloud-config, written as a Go duration
// string: "500ms", "5s", "1m30s", "2h". It decodes from a JSON or YAML
// string with DecodeConfig and encodes back to the same form, so a config
// type declares
//
//	ProvisioningTimeout provider.Duration `json:"provisioningTimeout,omitempty"`
//
// and reads cfg.ProvisioningTimeout.Duration. A number, a string without a
// unit ("5") or any other malformed value is an error naming the value and
// the expected form (through DecodeConfig, which never quotes a value: the
// field path, the kind of value and the expected form); 0 ("0s") is valid and is the field's zero value, so
// "unset" and "zero" mean the same thing. Duration accepts negative values:
// whether one is valid is for the config's Validate to say, naming its
// field. It is a plain value, safe to copy.
type Duration struct {
	time.Duration
}

// String returns the Go duration string, such as "1m30s".
func (d Duration) String() string { return d.Duration.String() }

// MarshalJSON encodes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// UnmarshalJSON decodes a Go duration string. It returns an error that
// names the value and the expected form for anything else; d is unchanged
// on error.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration %s: expected a string with a unit, such as \"5s\" or \"1m30s\"", clip.Quoted(string(b)))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %s: expected a number with a unit (ns, us, ms, s, m, h), such as \"5s\" or \"1m30s\"", quote(s))
	}
	d.Duration = v
	return nil
}
