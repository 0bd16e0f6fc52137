package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/ccmkit/ccmkit/internal/clip"
)

// The errors of the YAML and JSON libraries DecodeConfig uses quote the
// input: go.yaml.in/yaml/v2 prints an undefined alias's name ("unknown
// anchor 'X' referenced", decode.go), a non-scalar map key with %#v
// ("invalid map key", decode.go), a duplicated key, and a value that does
// not match its explicit tag ("cannot decode !!str `X`", resolve.go);
// sigs.k8s.io/yaml prints the value next to an unsupported map key
// (yaml.go, convertToJSONableObject); encoding/json prints number literals
// (UnmarshalTypeError). Any of them can be a credential, so DecodeConfig
// never returns their text: the functions below rebuild each error from
// what is safe — a line number, a field path, a kind, and the names of the
// user's own keys, cut to a bounded length.

// quote returns s cut to clip.MaxQuoted bytes (clip.Quoted: the one bound
// of every value ccmkit quotes) and quoted with strconv.Quote, so control
// characters cannot forge log lines.
func quote(s string) string { return strconv.Quote(clip.Quoted(s)) }

var (
	yamlLineRE = regexp.MustCompile(`^line ([0-9]+): `)
	// yamlCharRE finds a quoted character: the parser's fixed messages
	// quote single characters only ("did not find expected ',' or '}'").
	yamlCharRE  = regexp.MustCompile(`'[^']'`)
	duplicateRE = regexp.MustCompile(`^line ([0-9]+): key (.*) already set in map$`)
)

// yamlKinds maps a phrase of a go.yaml.in/yaml/v2 (or sigs.k8s.io/yaml)
// error whose text quotes the input to what DecodeConfig says instead.
var yamlKinds = []struct{ phrase, say string }{
	{"unknown anchor", "an alias (*name) refers to an anchor (&name) that is not defined"},
	{"value contains itself", "an anchor's value contains an alias to itself"},
	{"excessive aliasing", "too many aliases: the document expands beyond the parser's limit"},
	{"invalid map key", "a mapping key is a mapping or a sequence: keys must be scalars"},
	{"unsupported map key", "a mapping key is null or of an unsupported type: keys must be strings or numbers"},
	{"!!binary", "a !!binary value is not valid base64"},
	{"map merge", "a merge key (<<) needs a mapping or a sequence of mappings"},
	{"cannot decode", "a value does not match its explicit tag (such as !!int or !!float)"},
	{"invalid array", "a sequence has the wrong length"},
}

// yamlError rebuilds err, an error of go.yaml.in/yaml/v2 or of
// sigs.k8s.io/yaml's YAML-to-JSON conversion, without the input's text.
// fields holds the key names of the configuration type: a duplicated key is
// named only when it is one of them. data is the document err is about, to
// locate what the error does not (nil: not located).
func yamlError(err error, fields map[string]bool, data []byte) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "unmarshal errors:\n"); ok {
		return duplicateKeyError(rest, fields)
	}
	// The line, when the parser knows it.
	where := ""
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		where = "line " + m[1] + ": "
		msg = msg[len(m[0]):]
	}
	if strings.Contains(msg, depthExceeded) {
		if where == "" { // encoding/json's error: found in the document
			where = deepLine(data)
		}
		return depthError(where)
	}
	for _, k := range yamlKinds {
		if strings.Contains(msg, k.phrase) {
			return fmt.Errorf("malformed YAML: %s", k.say)
		}
	}
	// What is left are the scanner's and the parser's problems: fixed
	// messages of go.yaml.in/yaml/v2 (scannerc.go, parserc.go, readerc.go).
	// Anything unexpected is withheld rather than risk quoting input.
	if strings.ContainsAny(yamlCharRE.ReplaceAllString(msg, ""), "\n%'\"`") || utf8.RuneCountInString(msg) > 80 {
		msg = "syntax error"
	}
	return fmt.Errorf("%smalformed YAML: %s", where, msg)
}

// maxDepth is how deep a cloud-config may nest sequences and mappings, its
// top-level mapping counting as the first level: encoding/json's limit
// (maxNestingDepth, encoding/json/scanner.go), met when sigs.k8s.io/yaml
// decodes the YAML it converted to JSON. go.yaml.in/yaml/v2's parser has
// the same limit for flow ([ {) and block (indented) nesting, each alone
// (max_flow_level and max_indents, scannerc.go).
const maxDepth = 10000

// depthExceeded is in both libraries' errors for a document nested too
// deep: yaml/v2's "line N: exceeded max depth of 10000", encoding/json's
// "invalid character '[' exceeded max depth" (which has no line).
const depthExceeded = "exceeded max depth"

// depthError is the error of a document nested more than maxDepth levels
// deep; where is "line N: " or "" when the line is not known.
func depthError(where string) error {
	return fmt.Errorf("%smalformed YAML: sequences and mappings are nested more than %d levels deep (the nesting depth limit): expected at most %d levels, the top-level mapping included",
		where, maxDepth, maxDepth)
}

// deepLine returns "line N: " for a node of data that lies deeper than
// maxDepth (on the deepest branch, the first of equally deep ones, not
// necessarily the first such node in the document), found in
// go.yaml.in/yaml/v3's node tree, which keeps
// lines (and whose parser has yaml/v2's limits, so it reads what yaml/v2
// read), following aliases as the JSON conversion expands them; "" when it
// cannot tell.
func deepLine(data []byte) string {
	var doc yamlv3.Node
	if data == nil || yamlv3.Unmarshal(data, &doc) != nil {
		return ""
	}
	// height is memoized per node, so a document of many aliases to one
	// anchor costs one walk of it; a node being measured counts 0, which
	// cuts an alias to an enclosing anchor.
	heights := map[*yamlv3.Node]int{}
	var height func(n *yamlv3.Node) int
	height = func(n *yamlv3.Node) int {
		if h, ok := heights[n]; ok {
			return h
		}
		heights[n] = 0
		h := 0
		switch n.Kind {
		case yamlv3.AliasNode:
			if n.Alias != nil {
				h = height(n.Alias)
			}
		case yamlv3.DocumentNode, yamlv3.SequenceNode, yamlv3.MappingNode:
			for _, c := range n.Content {
				h = max(h, height(c))
			}
			if n.Kind != yamlv3.DocumentNode {
				h++
			}
		}
		heights[n] = h
		return h
	}
	if height(&doc) <= maxDepth {
		return ""
	}
	// Descend along the highest child, an alias standing for its anchor's
	// node, to the first node below the limit: each step is one level, and
	// the heights fall by one at each, so the walk ends.
	n := &doc // the document is level 0, its mapping level 1
	for range maxDepth + 1 {
		var next *yamlv3.Node
		for _, c := range n.Content {
			if next == nil || height(c) > height(next) {
				next = c
			}
		}
		for next != nil && next.Kind == yamlv3.AliasNode {
			next = next.Alias
		}
		if next == nil {
			return ""
		}
		n = next
	}
	return "line " + strconv.Itoa(n.Line) + ": "
}

// durationError is DecodeConfig's error for v, the decoded value of a
// Duration field that Duration.UnmarshalJSON refused: the kind of value
// and the expected form, without the value (Duration's own error quotes
// it, and a value may be a credential written in the wrong field).
func durationError(v any) error {
	const form = `a number with a unit (ns, us, ms, s, m, h), such as "5s" or "1m30s"`
	kind := "another kind of value"
	switch v.(type) {
	case string:
		return errors.New("malformed duration: expected " + form)
	case bool:
		kind = jsonKinds["bool"]
	case float64, int, int64, uint64:
		kind = jsonKinds["number"]
	case []any:
		kind = jsonKinds["array"]
	case map[string]any:
		kind = jsonKinds["object"]
	}
	return fmt.Errorf("got %s: expected a duration, a string of %s", kind, form)
}

// duplicateKeyError rebuilds go.yaml.in/yaml/v2's "line N: key K already
// set in map" list (a TypeError of a strict decode) from its first entry.
func duplicateKeyError(list string, fields map[string]bool) error {
	first, _, _ := strings.Cut(strings.TrimSpace(list), "\n")
	m := duplicateRE.FindStringSubmatch(first)
	if m == nil {
		return errors.New("malformed YAML: a value cannot be decoded")
	}
	if key, err := strconv.Unquote(m[2]); err == nil && fields[key] {
		return fmt.Errorf("line %s: field %q is given twice", m[1], key)
	}
	return fmt.Errorf("line %s: a mapping key is given twice", m[1])
}

// jsonError rebuilds an error of the strict JSON decode of a cloud-config
// without value text. An error of a field type's own UnmarshalJSON is
// returned as that type wrote it.
func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		kind, _, _ := strings.Cut(typeErr.Value, " ") // "number 1.5": the kind only
		got := jsonKinds[kind]
		if got == "" {
			got = "another kind of value"
		}
		path := typeErr.Field
		if path == "" {
			return fmt.Errorf("got %s: expected %s", got, typeName(typeErr.Type))
		}
		return fmt.Errorf("field %s: got %s: expected %s", quote(path), got, typeName(typeErr.Type))
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error unmarshaling JSON: ")
	msg = strings.TrimPrefix(msg, "while decoding JSON: ")
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		key, uerr := strconv.Unquote(rest)
		if uerr != nil {
			key = rest
		}
		return fmt.Errorf("unknown field %s: not a field of the configuration (names are matched exactly)", quote(key))
	}
	if strings.HasPrefix(msg, "json: ") {
		return errors.New("malformed value: it cannot be decoded")
	}
	return err
}

// jsonKinds names encoding/json's kinds of value (UnmarshalTypeError.Value)
// in YAML's words.
var jsonKinds = map[string]string{
	"string": "a string", "number": "a number", "bool": "a boolean",
	"array": "a sequence", "object": "a mapping",
}

// typeName names a Go type as a cloud-config author knows it.
func typeName(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	if t.Kind() != reflect.Pointer && !reflect.PointerTo(t).Implements(jsonUnmarshaler) && reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string" // encoding/json gives UnmarshalText strings only (Secret)
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer (" + t.Kind().String() + ")"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a sequence"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// fieldNames returns the json names of every field reachable from t:
// the keys a cloud-config of type t may contain, as opposed to map keys and
// values, which are data.
func fieldNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		fields := map[string]reflect.Type{}
		collectJSONFields(t, fields)
		for name, ft := range fields {
			names[name] = true
			walk(ft)
		}
	}
	walk(t)
	return names
}
