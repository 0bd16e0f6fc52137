package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cloudprovider "k8s.io/cloud-provider"
)

type testConfig struct {
	Endpoint string            `json:"endpoint"`
	Region   string            `json:"region,omitempty"`
	Token    Secret            `json:"token,omitempty"`
	Retries  int               `json:"retries,omitempty"`
	Zones    []testZone        `json:"zones,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Common
}

type testZone struct {
	Name    string            `json:"name"`
	Subnets map[string]string `json:"subnets,omitempty"`
}

// Common is embedded in testConfig: its fields are promoted.
type Common struct {
	Project string `json:"project,omitempty"`
}

// Validate requires an endpoint and a non-negative retry count.
func (c *testConfig) Validate() error {
	var errs field.ErrorList
	if c.Endpoint == "" {
		errs = append(errs, field.Required(field.NewPath("endpoint"), "the URL of the cloud API"))
	}
	if c.Retries < 0 {
		errs = append(errs, field.Invalid(field.NewPath("retries"), c.Retries, "must be 0 or more"))
	}
	if c.Token != "" && len(c.Token) < 8 {
		errs = append(errs, field.Invalid(field.NewPath("token"), c.Token, "must be at least 8 characters"))
	}
	return errs.ToAggregate()
}

// optional accepts the zero value.
type optional struct {
	Name string `json:"name"`
}

func TestDecodeConfig(t *testing.T) {
	tests := []struct {
		name    string
		reason  string
		in      io.Reader
		want    *testConfig
		wantErr []string // substrings the error must contain
	}{
		{
			name: "yaml", reason: "YAML is the usual cloud-config format",
			in:   strings.NewReader("endpoint: https://api.example\nregion: eu-1\nretries: 3\n"),
			want: &testConfig{Endpoint: "https://api.example", Region: "eu-1", Retries: 3},
		},
		{
			name: "json", reason: "JSON is YAML",
			in:   strings.NewReader(`{"endpoint":"https://api.example","token":"s3cr3t-t0ken"}`),
			want: &testConfig{Endpoint: "https://api.example", Token: "s3cr3t-t0ken"},
		},
		{
			name: "unknown field", reason: "a typo must not be silently ignored",
			in:      strings.NewReader("endpoint: x\nregoin: eu-1\n"),
			wantErr: []string{"regoin", "unknown field"},
		},
		{
			name: "field case differs", reason: "clusterId is not clusterID: matching must be exact, not encoding/json's case folding",
			in:      strings.NewReader("endpoint: x\nRegion: eu-1\n"),
			wantErr: []string{"Region", "unknown field"},
		},
		{
			name: "nested field case differs", reason: "case is checked at every depth, and the error gives the path",
			in:      strings.NewReader("endpoint: x\nzones:\n- name: a\n- Name: b\n"),
			wantErr: []string{"zones[1].Name", "zones[1].name", "case-sensitive"},
		},
		{
			name: "scalars in string fields", reason: "an unquoted number in a string field is that string; YAML 1.1 booleans (y, no, on) must be quoted, unquoted they read as true/false",
			in:   strings.NewReader("endpoint: 123\nregion: 'y'\nlabels: {a: \"on\", b: no}\nzones: [{name: \"no\", subnets: {x: 1}}]\n"),
			want: &testConfig{Endpoint: "123", Region: "y", Labels: map[string]string{"a": "on", "b": "false"}, Zones: []testZone{{Name: "no", Subnets: map[string]string{"x": "1"}}}},
		},
		{
			name: "embedded field", reason: "fields of an embedded struct are promoted, as in encoding/json",
			in:   strings.NewReader("endpoint: x\nproject: p\n"),
			want: &testConfig{Endpoint: "x", Common: Common{Project: "p"}},
		},
		{
			name: "embedded field case differs", reason: "promoted fields are case-checked too",
			in:      strings.NewReader("endpoint: x\nProject: p\n"),
			wantErr: []string{"Project", "case-sensitive"},
		},
		{
			name: "duplicate field", reason: "strict decoding rejects a key given twice",
			in:      strings.NewReader("endpoint: x\nendpoint: y\n"),
			wantErr: []string{"endpoint"},
		},
		{
			name: "bad yaml", reason: "a syntax error is reported, not a zero config",
			in:      strings.NewReader("endpoint: [unterminated\n"),
			wantErr: []string{"invalid cloud-config"},
		},
		{
			name: "wrong type", reason: "a string where an int is expected names the field",
			in:      strings.NewReader("endpoint: x\nretries: many\n"),
			wantErr: []string{"retries"},
		},
		{
			name: "nil reader", reason: "no --cloud-config gives the zero config, which validation rejects here",
			in:      nil,
			wantErr: []string{"endpoint", "Required"},
		},
		{
			name: "empty document", reason: "an empty file is the zero config too",
			in:      strings.NewReader("  \n"),
			wantErr: []string{"endpoint", "Required"},
		},
		{
			name: "validation failure", reason: "validation names the field, the value and what was expected",
			in:      strings.NewReader("endpoint: x\nretries: -2\n"),
			wantErr: []string{"retries", "-2", "must be 0 or more"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeConfig[testConfig](tc.in)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("DecodeConfig = %+v, nil; want an error (%s)", got, tc.reason)
				}
				if !errors.Is(err, ErrInvalidConfig) {
					t.Errorf("error %q does not wrap ErrInvalidConfig", err)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q (%s)", err, s, tc.reason)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeConfig: %v (%s)", err, tc.reason)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeConfigYAMLScalars pins the YAML 1.1 scalar rules DecodeConfig
// documents for string fields.
func TestDecodeConfigYAMLScalars(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		value  string
		want   string
	}{
		{"decimal", "a plain integer is kept as written", "1234567", "1234567"},
		{"quoted octal", "quoting keeps any value", `"0123"`, "0123"},
		{"octal", "YAML 1.1 reads a leading 0 as octal", "0123", "83"},
		{"hex", "YAML 1.1 reads 0x as hexadecimal", "0x1F", "31"},
		{"float", "floats are normalised", "1.50", "1.5"},
		{"exponent", "exponents are expanded", "1e3", "1000"},
		{"y", "y is a YAML 1.1 boolean", "y", "true"},
		{"n", "n is a YAML 1.1 boolean", "n", "false"},
		{"off", "off is a YAML 1.1 boolean", "off", "false"},
		{"quoted y", "quoting keeps a boolean word", `"y"`, "y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeConfig[optional](strings.NewReader("name: " + tt.value + "\n"))
			if err != nil {
				t.Fatalf("DecodeConfig(name: %s): %v", tt.value, err)
			}
			if diff := cmp.Diff(tt.want, got.Name); diff != "" {
				t.Errorf("DecodeConfig(name: %s).Name (-want +got), %s:\n%s", tt.value, tt.reason, diff)
			}
		})
	}
}

func TestDecodeConfigZeroAccepted(t *testing.T) {
	var nilFile *os.File // a typed-nil reader is "no config" too
	for _, r := range []io.Reader{nil, nilFile} {
		got, err := DecodeConfig[optional](r)
		if err != nil || got == nil || *got != (optional{}) {
			t.Errorf("DecodeConfig[optional](%#v) = %+v, %v; want the zero config", r, got, err)
		}
	}
}

func TestSecretRedacted(t *testing.T) {
	const token = "hunter2-very-secret"
	cfg := testConfig{Endpoint: "https://api", Token: token}
	var logBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("config", "cfg", cfg, "token", cfg.Token)
	js, _ := json.Marshal(cfg)
	outputs := map[string]string{
		"%v":   fmt.Sprintf("%v", cfg),
		"%+v":  fmt.Sprintf("%+v", cfg),
		"%#v":  fmt.Sprintf("%#v", cfg),
		"%s":   fmt.Sprintf("%s", cfg.Token),
		"%q":   fmt.Sprintf("%q", cfg.Token),
		"%x":   fmt.Sprintf("%x", cfg.Token),
		"ptr":  fmt.Sprintf("%+v", &cfg),
		"json": string(js),
		"slog": logBuf.String(),
	}
	// A validation error about the token must not reveal it either.
	bad := testConfig{Endpoint: "x", Token: "short"}
	outputs["validation error"] = bad.Validate().Error()
	_, err := DecodeConfig[testConfig](strings.NewReader("endpoint: x\ntoken: short\n"))
	outputs["decode error"] = fmt.Sprint(err)

	for name, out := range outputs {
		if strings.Contains(out, token) || strings.Contains(out, "short\"") || strings.Contains(out, "\"short") {
			t.Errorf("%s reveals the credential: %s", name, out)
		}
		if name != "%x" && !strings.Contains(out, "redacted") {
			t.Errorf("%s does not show the redacted marker: %s", name, out)
		}
	}
	if cfg.Token.Reveal() != token {
		t.Errorf("Reveal() = %q, want %q", cfg.Token.Reveal(), token)
	}
	if Secret("").String() != "" {
		t.Errorf("empty Secret prints %q, want \"\"", Secret("").String())
	}
}

// testProviders numbers the names tests register: the cloudprovider
// registry is global to the process and never forgets a name, so a test
// that registers a fixed name would fail when run again (go test -count).
var testProviders atomic.Int64

// uniqueName returns base with a number no other call returned.
func uniqueName(base string) string {
	return fmt.Sprintf("%s-%d", base, testProviders.Add(1))
}

// registerTestProvider registers a provider of testConfig under a new name
// made from base, and returns the name.
func registerTestProvider(t *testing.T, base string) string {
	t.Helper()
	name := uniqueName(base)
	err := Register(name, func(cfg *testConfig) (cloudprovider.Interface, error) {
		return New(name, cfg.Region, Capabilities{}), nil
	})
	if err != nil {
		t.Fatalf("Register(%q): %v", name, err)
	}
	return name
}

func TestInitCloudProviderWithConfigFile(t *testing.T) {
	name := registerTestProvider(t, "ccmkit-test-file")
	path := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(path, []byte("endpoint: https://api\nregion: eu-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cloud, err := cloudprovider.InitCloudProvider(name, path)
	if err != nil {
		t.Fatalf("InitCloudProvider: %v", err)
	}
	if cloud.ProviderName() != name || !cloud.HasClusterID() {
		t.Errorf("got provider %q HasClusterID=%v; want %s, true (region used as cluster ID)", cloud.ProviderName(), cloud.HasClusterID(), name)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("endpoint: https://api\nzone: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cloudprovider.InitCloudProvider(name, bad); err == nil || !strings.Contains(err.Error(), "zone") {
		t.Errorf("InitCloudProvider with an unknown field: err = %v, want an error naming \"zone\"", err)
	}
}

func TestInitCloudProviderWithoutConfig(t *testing.T) {
	name := registerTestProvider(t, "ccmkit-test-noconfig")
	_, err := cloudprovider.InitCloudProvider(name, "")
	if err == nil || !strings.Contains(err.Error(), "endpoint") {
		t.Fatalf("InitCloudProvider with no config: err = %v; want the validation error naming endpoint", err)
	}

	optName := uniqueName("ccmkit-test-optional")
	if err := Register(optName, func(*optional) (cloudprovider.Interface, error) {
		return New(optName, "", Capabilities{}), nil
	}); err != nil {
		t.Fatal(err)
	}
	cloud, err := cloudprovider.InitCloudProvider(optName, "")
	if err != nil || cloud == nil {
		t.Fatalf("InitCloudProvider(optional, no config) = %v, %v; want a provider", cloud, err)
	}
}

func TestRegisterErrors(t *testing.T) {
	ok := func(*optional) (cloudprovider.Interface, error) { return New("x", "", Capabilities{}), nil }
	twice := uniqueName("ccmkit-test-twice")
	if err := Register(twice, ok); err != nil {
		t.Fatal(err)
	}
	if err := Register(twice, ok); !errors.Is(err, ErrAlreadyRegistered) {
		t.Errorf("second Register = %v, want ErrAlreadyRegistered", err)
	}
	if got := Registered(); !slices.Contains(got, twice) || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("Registered() = %q; want %q listed once, sorted, after a failed second registration", got, twice)
	}
	if err := Register("", ok); err == nil {
		t.Error("Register with an empty name succeeded")
	}
	if err := Register[optional](uniqueName("ccmkit-test-nilfactory"), nil); err == nil {
		t.Error("Register with a nil factory succeeded")
	}
	var nilCloud *Cloud
	_, err := Build("x", nil, func(*optional) (cloudprovider.Interface, error) { return nilCloud, nil })
	if err == nil || !strings.Contains(err.Error(), "nil provider") {
		t.Errorf("Build with a factory returning typed nil: err = %v, want a nil-provider error", err)
	}
	_, err = Build("x", nil, func(*optional) (cloudprovider.Interface, error) { return nil, errors.New("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Build with a failing factory: err = %v, want it to carry boom", err)
	}
}

func FuzzDecodeConfig(f *testing.F) {
	for _, s := range []string{
		"endpoint: x\n", `{"endpoint":"x","retries":3}`, "endpoint: [", "retries: -1\n",
		"token: abc\n", "a: b\n", "- 1\n- 2\n", "endpoint: x\nendpoint: y\n", "\x00", "&a [*a]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		cfg, err := DecodeConfig[testConfig](strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		if cfg == nil || cfg.Validate() != nil {
			t.Fatalf("accepted %q but got %+v failing validation", in, cfg)
		}
	})
}
