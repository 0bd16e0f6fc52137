package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Validator is implemented by configuration types that check themselves.
// DecodeConfig calls Validate after decoding, also for the zero value that a
// missing --cloud-config produces, so Validate decides whether a cloud-config
// is required. Errors should name the field, the value and what was expected;
// k8s.io/apimachinery/pkg/util/validation/field builds such errors
// (field.ErrorList.ToAggregate()).
type Validator interface {
	Validate() error
}

// ErrInvalidConfig is wrapped by every error DecodeConfig returns, so
// callers can tell a bad cloud-config from other failures with errors.Is.
var ErrInvalidConfig = errors.New("invalid cloud-config")

// DecodeConfig decodes a cloud-config into a new C and validates it.
//
// r holds YAML or JSON (JSON is YAML). Decoding is strict: a field that C
// does not declare, or a field given twice, is an error that names it. A nil
// r — what k8s.io/cloud-provider InitCloudProvider passes when there is no
// --cloud-config — and an empty document both give the zero C. Field names
// are C's json tags, matched exactly (case-sensitively: "clusterId" is an
// unknown field when the tag is "clusterID").
//
// When C (or *C) implements Validator, Validate is called and its error is
// returned wrapped. Every error wraps ErrInvalidConfig. DecodeConfig never
// panics on any input; fields of type Secret never appear in its errors.
func DecodeConfig[C any](r io.Reader) (*C, error) {
	cfg := new(C)
	if present(r) {
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("%w: reading: %v", ErrInvalidConfig, err)
		}
		if len(bytes.TrimSpace(data)) > 0 {
			if err := decodeStrict(data, cfg); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
			}
		}
	}
	if v, ok := any(cfg).(Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	return cfg, nil
}

// decodeStrict converts YAML (or JSON) to JSON, rejecting duplicate keys,
// then decodes it case-sensitively, rejecting unknown fields. encoding/json
// alone would match "clusterId" to a field tagged "clusterID" and silently
// accept the typo; sigs.k8s.io/json, as the Kubernetes API machinery uses
// it, does not.
func decodeStrict(data []byte, into any) error {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, into)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// Secret is a string that holds a credential: a password, a token, an API
// key. It decodes from a cloud-config like a string, and prints as
// "[redacted]" (or "" when empty) with every fmt verb, in JSON and in slog,
// so a logged or wrapped configuration never reveals it. Call Reveal to use
// the value.
type Secret string

const redacted = "[redacted]"

var (
	_ fmt.Formatter  = Secret("")
	_ fmt.Stringer   = Secret("")
	_ fmt.GoStringer = Secret("")
	_ json.Marshaler = Secret("")
	_ slog.LogValuer = Secret("")
)

// Reveal returns the credential itself. Do not log it.
func (s Secret) Reveal() string { return string(s) }

// String returns "[redacted]", or "" for an empty Secret (so "is it set?"
// stays visible).
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString implements fmt.GoStringer for %#v.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.String()) }

// Format implements fmt.Formatter: every verb prints the redacted form.
func (s Secret) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		fmt.Fprintf(f, "%q", s.String())
	case 'v':
		if f.Flag('#') {
			io.WriteString(f, s.GoString())
			return
		}
		io.WriteString(f, s.String())
	default:
		io.WriteString(f, s.String())
	}
}

// MarshalJSON implements json.Marshaler with the redacted form. A Secret
// therefore does not survive a JSON round trip; configurations are read, not
// written, by ccmkit.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// LogValue implements slog.LogValuer with the redacted form.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
