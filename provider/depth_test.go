package provider

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecodeConfigNestingDepth feeds cloud-configs nested deeper than the
// libraries allow, by each way the limit is met: the error names the line,
// the limit and what was expected, never the input's values.
func TestDecodeConfigNestingDepth(t *testing.T) {
	const s = fuzzSecret
	flow := func(n int) string { return strings.Repeat("[", n) + s + strings.Repeat("]", n) }
	tooDeep := func(line string) string {
		return "invalid cloud-config: line " + line + ": malformed YAML: sequences and mappings are nested more than 10000 levels deep (the nesting depth limit): expected at most 10000 levels, the top-level mapping included"
	}
	tests := []struct {
		name, reason, in, want string
	}{
		{name: "10,000 flow sequences", reason: "with the top-level mapping, 10,001 levels: encoding/json refuses them with neither line nor limit",
			in: "endpoint: x\ntoken: " + flow(10000) + "\n", want: tooDeep("2")},
		{name: "10,001 flow sequences", reason: "yaml/v2's parser refuses them first, with the line",
			in: "endpoint: x\n\ntoken: " + flow(10001) + "\n", want: tooDeep("3")},
		{name: "100,000 flow mappings", reason: "far past the limit: refused as early",
			in: "endpoint: x\ntoken: " + strings.Repeat("{a: ", 100000) + s + strings.Repeat("}", 100000) + "\n", want: tooDeep("2")},
		{name: "block sequences", reason: "10,001 indented levels on one line: yaml/v2's indent limit",
			in: "endpoint: x\ntoken:\n" + strings.Repeat("- ", 10001) + s + "\n", want: tooDeep("3")},
		{name: "block and flow", reason: "6,000 block and 5,000 flow levels: each under the parser's limits, together over encoding/json's",
			in: "endpoint: x\ntoken:\n" + strings.Repeat("- ", 6000) + flow(5000) + "\n", want: tooDeep("3")},
		{name: "through an alias", reason: "an alias nests its anchor's 9,000 levels 1,500 levels deeper, as the JSON conversion expands it: the line is the anchor's",
			in: "endpoint: x\nlabels: &a " + flow(9000) + "\nzones: " + strings.Repeat("[", 1500) + "*a" + strings.Repeat("]", 1500) + "\n", want: tooDeep("2")},
		{name: "second document", reason: "a document after --- is parsed by yaml/v2 alone, whose limit names the line",
			in: "endpoint: x\n---\ntoken: " + flow(10001) + "\n", want: "invalid cloud-config: YAML document 2: " + strings.TrimPrefix(tooDeep("3"), "invalid cloud-config: ")},
		{name: "at the limit", reason: "10,000 levels are not too deep: the error is the field's type",
			in: "endpoint: x\ntoken: " + flow(9999) + "\n", want: `invalid cloud-config: field "token": got a sequence: expected a string`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeConfig[testConfig](strings.NewReader(tc.in))
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("%s: DecodeConfig: %v; want an error wrapping ErrInvalidConfig", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("%s: error (-want +got):\n%s", tc.reason, diff)
			}
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error reveals the secret: %v", tc.reason, err)
			}
		})
	}
}
