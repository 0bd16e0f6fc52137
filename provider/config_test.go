package provider

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zapcore"
	yamlv2 "go.yaml.in/yaml/v2"
	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cloudprovider "k8s.io/cloud-provider"
	logsjson "k8s.io/component-base/logs/json"
	"k8s.io/klog/v2/textlogger"
	"sigs.k8s.io/yaml"
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
	if !c.Token.IsZero() && len(c.Token.Reveal()) < 8 {
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
			want: &testConfig{Endpoint: "https://api.example", Token: NewSecret("s3cr3t-t0ken")},
		},
		{
			name: "json with a trailing comma", reason: "YAML would read it, but its author wrote JSON, which refuses it (issue 29)",
			in:      strings.NewReader("{\"endpoint\": \"https://api.example\",\n \"region\": \"eu-1\",\n}"),
			wantErr: []string{"line 3, column 1", "not valid JSON", "expected JSON throughout, or YAML"},
		},
		{
			name: "json with a comment", reason: "a # comment is YAML, not JSON",
			in:      strings.NewReader("{\"endpoint\": \"x\", # the API\n\"region\": \"eu-1\"}"),
			wantErr: []string{"line 1, column 19", "not valid JSON"},
		},
		{
			name: "yaml flow mapping", reason: "bare keys are YAML's flow style, not JSON: still read as YAML",
			in:   strings.NewReader("{endpoint: https://api.example, region: eu-1,}"),
			want: &testConfig{Endpoint: "https://api.example", Region: "eu-1"},
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
	cfg := testConfig{Endpoint: "https://api", Token: NewSecret(token)}
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
	bad := testConfig{Endpoint: "x", Token: NewSecret("short")}
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
	if (Secret{}).String() != "" || NewSecret("").String() != "" || !NewSecret("").IsZero() {
		t.Errorf("empty Secret prints %q, want \"\"", Secret{}.String())
	}
}

// TestSecretSafePrinters checks that the printers that call a Secret's
// methods show the redacted marker, with the Secret nested the ways a
// configuration nests it. secret_test.go checks the printers that cannot
// call them, over random nestings.
func TestSecretSafePrinters(t *testing.T) {
	const token = "hunter2-very-secret"
	type nested struct {
		Cfg    testConfig        `json:"cfg" yaml:"cfg" xml:"cfg"`
		List   []Secret          `json:"list" yaml:"list" xml:"list"`
		ByName map[string]Secret `json:"byName" yaml:"byName" xml:"-"`
		Ptr    *Secret           `json:"ptr" yaml:"ptr" xml:"ptr"`
	}
	tok := NewSecret(token)
	v := nested{Cfg: testConfig{Endpoint: "e", Token: tok}, List: []Secret{tok}, ByName: map[string]Secret{"k": tok}, Ptr: &tok}
	printers := []struct {
		name  string
		print func() (string, error)
	}{
		{"fmt %v", func() (string, error) { return fmt.Sprintf("%v", v), nil }},
		{"fmt %+v", func() (string, error) { return fmt.Sprintf("%+v", v), nil }},
		{"fmt %#v", func() (string, error) { return fmt.Sprintf("%#v", v), nil }},
		{"fmt %s of the pointer", func() (string, error) { return fmt.Sprintf("%s", v.Ptr), nil }},
		{"encoding/json", func() (string, error) { b, err := json.Marshal(v); return string(b), err }},
		{"sigs.k8s.io/yaml", func() (string, error) { b, err := yaml.Marshal(v); return string(b), err }},
		{"go.yaml.in/yaml/v2", func() (string, error) { b, err := yamlv2.Marshal(v); return string(b), err }},
		{"go.yaml.in/yaml/v3", func() (string, error) { b, err := yamlv3.Marshal(v); return string(b), err }},
		{"encoding/xml", func() (string, error) { // encoding/xml cannot marshal maps
			type view struct {
				Token Secret
				List  []Secret
				Ptr   *Secret
			}
			b, err := xml.Marshal(view{tok, v.List, v.Ptr})
			return string(b), err
		}},
		{"slog text", func() (string, error) {
			var buf bytes.Buffer
			slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "v", v, "token", tok)
			return buf.String(), nil
		}},
		{"slog JSON", func() (string, error) {
			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "v", v, "token", tok)
			return buf.String(), nil
		}},
		{"klog text", func() (string, error) {
			var buf bytes.Buffer
			textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf))).Info("config", "v", v, "token", tok)
			return buf.String(), nil
		}},
		{"klog JSON", func() (string, error) {
			var buf bytes.Buffer
			logger, _ := logsjson.NewJSONLogger(0, zapcore.AddSync(&buf), nil, nil)
			logger.Info("config", "v", v, "token", tok)
			return buf.String(), nil
		}},
		{"field.Invalid", func() (string, error) {
			return field.Invalid(field.NewPath("token"), tok, "too short").Error(), nil
		}},
	}
	for _, p := range printers {
		t.Run(p.name, func(t *testing.T) {
			out, err := p.print()
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			if strings.Contains(out, token) {
				t.Errorf("%s reveals the secret: %s", p.name, out)
			}
			if !strings.Contains(out, redacted) {
				t.Errorf("%s does not show %q (does it print the value at all?): %s", p.name, redacted, out)
			}
		})
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
		return New(name, Options{ClusterID: cfg.Region})
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
		return New(optName, Options{})
	}); err != nil {
		t.Fatal(err)
	}
	cloud, err := cloudprovider.InitCloudProvider(optName, "")
	if err != nil || cloud == nil {
		t.Fatalf("InitCloudProvider(optional, no config) = %v, %v; want a provider", cloud, err)
	}
}

func TestRegisterErrors(t *testing.T) {
	ok := func(*optional) (cloudprovider.Interface, error) { return New("x", Options{}) }
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

// fuzzSecret is the credential the no-secret tests and FuzzDecodeConfig
// place in cloud-configs: distinctive, so that no message contains it by
// chance.
const fuzzSecret = "S3CR3T-zq9x"

// TestDecodeConfigNoSecretInErrors feeds inputs whose library errors quote
// the input (issue 13): each error must say where and what, never the
// secret.
func TestDecodeConfigNoSecretInErrors(t *testing.T) {
	const s = fuzzSecret
	tests := []struct {
		name   string
		reason string
		in     string
		want   string // a substring of the error: where and what
	}{
		{name: "undefined alias", reason: "go.yaml.in/yaml/v2 quotes the alias name", in: "endpoint: x\ntoken: *" + s + "\n", want: "anchor (&name) that is not defined"},
		{name: "template braces", reason: "{{...}} is a flow mapping used as a key, printed with %#v", in: "endpoint: x\ntoken: {{" + s + "}}\n", want: "keys must be scalars"},
		{name: "flow sequence key", reason: "a sequence as a map key is printed with %#v", in: "endpoint: x\ntoken: [[" + s + "]: 1]\n", want: "keys must be scalars"},
		{name: "duplicate key in a value", reason: "a strict decode names a duplicated key, which here is the secret", in: "endpoint: x\ntoken: {" + s + ", " + s + "}\n", want: "line 2: a mapping key is given twice"},
		{name: "null key", reason: "sigs.k8s.io/yaml prints the value next to an unsupported key", in: "endpoint: x\ntoken:\n  ~: " + s + "\n", want: "key is null"},
		{name: "self-referencing anchor", reason: "the anchor's name is quoted", in: "endpoint: x\ntoken: &" + s + " [*" + s + "]\n", want: "alias to itself"},
		{name: "explicit tag", reason: "resolve.go quotes a value that does not match its tag", in: "endpoint: x\ntoken: !!float " + s + "\n", want: "explicit tag"},
		{name: "binary", reason: "a bad !!binary value", in: "endpoint: x\ntoken: !!binary " + s + "\n", want: "base64"},
		{name: "merge", reason: "a merge of a scalar", in: "endpoint: x\n<<: " + s + "\n", want: "merge key"},
		{name: "syntax error after the secret", reason: "a syntax error gives the line and the kind", in: "endpoint: x\ntoken: " + s + "\n  bad: x\n", want: "line 3: malformed YAML: mapping values are not allowed"},
		{name: "unterminated flow", reason: "the parser's message quotes single characters only", in: "{endpoint: x, token: " + s + "\n", want: "did not find expected ',' or '}'"},
		{name: "control character", reason: "a reader error", in: "endpoint: x\ntoken: \x01" + s + "\n", want: "control characters"},
		{name: "second document", reason: "a second document is an error, not silently ignored, and its content is not quoted", in: "endpoint: x\n---\ntoken: " + s + "\n", want: "YAML document 2 is not empty"},
		{name: "bad second document", reason: "a syntax error in document 2 names the document and the line", in: "endpoint: x\n---\n{token: " + s + "\n", want: "YAML document 2: line 3"},
		{name: "number as the secret", reason: "a Secret is a string; YAML would have changed an unquoted number (0x1F reads as 31)", in: "endpoint: x\ntoken: 0x1F1F1F1F\n", want: `field "token": got a number: expected a string`},
		{name: "boolean as the secret", reason: "a Secret is a string", in: "endpoint: x\ntoken: true\n", want: `field "token": got a boolean: expected a string`},
		{name: "number in an int field", reason: "encoding/json prints number literals", in: "endpoint: x\nretries: 1.25\n", want: `field "retries": got a number: expected an integer`},
		{name: "secret in an int field", reason: "a wrong type names the field and the kind of value", in: "endpoint: x\nretries: " + s + "\n", want: `field "retries": got a string`},
		{name: "mapping as the secret", reason: "a mapping where a string is expected", in: "endpoint: x\ntoken: {" + s + ": 1}\n", want: `field "token": got a mapping: expected a string`},
		{name: "json duplicate", reason: "JSON is YAML: the same rules", in: `{"endpoint":"x","token":"` + s + `","token":"` + s + `"}`, want: `field "token" is given twice`},
		{name: "json type", reason: "JSON is YAML: the same rules", in: `{"endpoint":"x","token":["` + s + `"]}`, want: `field "token": got a sequence`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeConfig[testConfig](strings.NewReader(tc.in))
			if err == nil || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("DecodeConfig(%q) = %v; want an error wrapping ErrInvalidConfig (%s)", tc.in, err, tc.reason)
			}
			if strings.Contains(err.Error(), s) {
				t.Errorf("DecodeConfig(%q) error reveals the secret: %v (%s)", tc.in, err, tc.reason)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeConfig(%q) error = %v; want it to contain %q (%s)", tc.in, err, tc.want, tc.reason)
			}
		})
	}
}

// TestDecodeConfigLimits pins the size limit and the one-document rule.
func TestDecodeConfigLimits(t *testing.T) {
	big := "endpoint: x\nregion: " + strings.Repeat("a", maxConfigSize) + "\n"
	file := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(file, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	limit := fmt.Sprint(maxConfigSize)
	tests := []struct {
		name    string
		reason  string
		in      io.Reader
		wantErr string // "" means success
	}{
		{name: "at the limit", reason: "maxConfigSize bytes are accepted", in: strings.NewReader("endpoint: x\nregion: " + strings.Repeat("a", maxConfigSize-21) + "\n")},
		{name: "over the limit", reason: "the error names the size and the limit", in: strings.NewReader(big), wantErr: fmt.Sprintf("is %d bytes: expected at most %s bytes", len(big), limit)},
		{name: "file over the limit", reason: "a file's size comes from Stat", in: f, wantErr: fmt.Sprintf("is %d bytes: expected at most %s", len(big), limit)},
		{name: "stream over the limit", reason: "a stream of unknown size is not read to its end", in: io.MultiReader(strings.NewReader(big)), wantErr: "is more than " + limit + " bytes"},
		{name: "second document", reason: "a document after --- would be ignored", in: strings.NewReader("endpoint: x\n---\nregion: y\n"), wantErr: "YAML document 2 is not empty"},
		{name: "fourth document", reason: "empty documents are skipped, the first non-empty one is named", in: strings.NewReader("endpoint: x\n---\n---\n# nothing\n---\nregion: y\n"), wantErr: "YAML document 4 is not empty"},
		{name: "document end marker", reason: "a document after ... is a second document too", in: strings.NewReader("endpoint: x\n...\nregion: y\n"), wantErr: "YAML document 2"},
		{name: "empty first document", reason: "the content of document 2 must not be ignored either", in: strings.NewReader("---\n---\nendpoint: x\n"), wantErr: "YAML document 2 is not empty"},
		{name: "leading marker", reason: "a single document may start with ---", in: strings.NewReader("---\nendpoint: x\n")},
		{name: "trailing marker", reason: "an empty trailing document holds nothing to ignore", in: strings.NewReader("endpoint: x\n---\n")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeConfig[testConfig](tc.in)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("DecodeConfig: %v (%s)", err, tc.reason)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("DecodeConfig error = %v; want one wrapping ErrInvalidConfig containing %q (%s)", err, tc.wantErr, tc.reason)
			}
		})
	}
}

// unknownFieldRE matches what DecodeConfig may quote from its input: the
// user's own keys, in unknown-field errors.
var unknownFieldRE = regexp.MustCompile(`unknown field "(?:[^"\\]|\\.)*"`)

// checkNoSecret fails t when fuzzSecret appears in the printed forms of
// cfg (unless a field that is not a Secret holds it: the user's choice) or
// in err (outside the user's own key names).
func checkNoSecret(t *testing.T, in string, cfg *testConfig, err error) {
	t.Helper()
	if err != nil {
		if msg := unknownFieldRE.ReplaceAllString(err.Error(), ""); strings.Contains(msg, fuzzSecret) {
			t.Fatalf("DecodeConfig(%q) error reveals the secret: %v", in, err)
		}
		return
	}
	plain := *cfg
	plain.Token = Secret{}
	if strings.Contains(fmt.Sprintf("%#v", plain), fuzzSecret) {
		return // a field that is not a Secret holds it
	}
	js, jerr := json.Marshal(cfg)
	if jerr != nil {
		t.Fatalf("json.Marshal(%+v): %v", cfg, jerr)
	}
	var logBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("config", "cfg", cfg)
	for _, out := range []string{fmt.Sprintf("%v", *cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), string(js), logBuf.String()} {
		if strings.Contains(out, fuzzSecret) {
			t.Fatalf("DecodeConfig(%q) gives a config that prints the secret: %s", in, out)
		}
	}
}

func FuzzDecodeConfig(f *testing.F) {
	for _, s := range []string{
		"endpoint: x\n", `{"endpoint":"x","retries":3}`, "endpoint: [", "retries: -1\n",
		"token: abc\n", "a: b\n", "- 1\n- 2\n", "endpoint: x\nendpoint: y\n", "\x00", "&a [*a]",
		// Issue 13's leaks and their relatives, with the secret in values,
		// keys, anchors, aliases, flow collections and a second document.
		"endpoint: x\ntoken: *" + fuzzSecret + "\n",
		"endpoint: x\ntoken: {{" + fuzzSecret + "}}\n",
		"endpoint: x\ntoken: [[" + fuzzSecret + "]: 1]\n",
		"endpoint: x\ntoken: {" + fuzzSecret + ", " + fuzzSecret + "}\n",
		"endpoint: x\ntoken:\n  ~: " + fuzzSecret + "\n",
		"endpoint: x\ntoken: &" + fuzzSecret + " [*" + fuzzSecret + "]\n",
		"endpoint: x\ntoken: &a " + fuzzSecret + "xx\nzones: [{name: *a}]\n",
		"endpoint: x\ntoken: !!float " + fuzzSecret + "\n",
		"endpoint: x\ntoken: " + fuzzSecret + "\n---\ntoken: " + fuzzSecret + "\n",
		"endpoint: x\n---\n{token: " + fuzzSecret + "\n",
		`{"endpoint":"x","token":"` + fuzzSecret + `"}`,
		`{"endpoint":"x","token":"` + fuzzSecret + `","token":"` + fuzzSecret + `"}`,
		"endpoint: x\ntoken: '" + fuzzSecret + "'\nretries: " + fuzzSecret + "\n",
		"endpoint: x\nzones: [{name: a, subnets: {" + fuzzSecret + ": [1]}}]\n",
		"endpoint: x\ntoken: {" + fuzzSecret + ": 1}\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		cfg, err := DecodeConfig[testConfig](strings.NewReader(in))
		checkNoSecret(t, in, cfg, err)
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

// TestDecodeConfigTextFieldPath: a field whose type decodes itself from
// text (netip.Addr here, instances.State in the fake) is reported with its
// path, which encoding/json would leave out.
func TestDecodeConfigTextFieldPath(t *testing.T) {
	type withAddr struct {
		Peers []struct {
			Addr netip.Addr `json:"addr"`
		} `json:"peers"`
	}
	for _, tc := range []struct {
		name, doc, want, reason string
	}{
		{name: "valid", doc: "peers: [{addr: 10.0.0.1}]", reason: "a valid address decodes"},
		{name: "malformed", doc: "peers: [{addr: 10.0.0.1}, {addr: not-an-ip}]", want: "invalid cloud-config: peers[1].addr: ", reason: "the path names the list entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeConfig[withAddr](strings.NewReader(tc.doc))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("DecodeConfig = %v, want nil: %s", err, tc.reason)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Errorf("DecodeConfig error = %v, want one starting %q: %s", err, tc.want, tc.reason)
			}
		})
	}
}
