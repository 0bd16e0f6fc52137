package provider

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"

	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/clip"
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

// maxConfigSize is the largest cloud-config DecodeConfig accepts, in bytes
// (1 MiB). A cloud-config is a few hundred bytes of settings; the limit
// keeps a mistaken or hostile file (a 64 MiB value takes seconds and
// gigabytes to decode) from stalling the cloud-controller-manager's start.
const maxConfigSize = 1 << 20

// DecodeConfig decodes a cloud-config into a new C and validates it.
//
// r holds YAML or JSON (JSON is YAML), at most 1 MiB (1048576 bytes), and one
// YAML document: a second document after "---" (or "...") is an error
// naming it, unless it is empty, so nothing is ignored. Decoding is strict:
// a field that C does not declare, or a field given twice, is an error that
// names it. A nil r — what k8s.io/cloud-provider InitCloudProvider passes
// when there is no --cloud-config — and an empty document both give the
// zero C. Field names are C's json tags, matched exactly (case-sensitively:
// "clusterId" is an unknown field when the tag is "clusterID"). Scalars
// follow YAML 1.1 as sigs.k8s.io/yaml reads them: an unquoted decimal
// integer in a string field is kept as written, but other numbers are
// rewritten (0123 becomes "83", 0x1F "31", 1.50 "1.5", 1e3 "1000") and an
// unquoted y, yes, n, no, on or off becomes "true" or "false": quote such
// values. A cloud-config that begins as JSON ({") must be valid JSON
// throughout: YAML would accept a trailing comma or a comment in it.
//
// When C (or *C) implements Validator, Validate is called and its error is
// returned wrapped. Every error wraps ErrInvalidConfig. DecodeConfig never
// panics on any input.
//
// Its errors never quote a value of the input, so a credential cannot leak
// through them whatever field, key, anchor or document it was written in:
// a YAML syntax error gives the line (when the parser knows it) and the
// kind of mistake; sequences and mappings nested more than 10000 levels
// deep (encoding/json's and go.yaml.in/yaml/v2's limit) give the line
// where the nesting passes the limit, and the limit; a wrong type gives the field path and the expected type;
// an unknown or misspelled field gives the key as written (it is the
// user's own key), cut to 64 characters. The exceptions are the errors of
// C's own code, returned as it wrote them: Validate's, and those of a field
// type's UnmarshalJSON other than Duration (a malformed Duration gives the
// field path, the kind of value and the expected form). A Secret is
// redacted in Validate errors built with fmt or k8s.io/apimachinery's field
// package.
func DecodeConfig[C any](r io.Reader) (*C, error) {
	cfg := new(C)
	if !check.IsNil(r) {
		data, err := readConfig(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
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

// checkJSON rejects a cloud-config written as JSON that is not valid
// JSON. YAML reads JSON, but also reads what JSON refuses (a trailing
// comma, a comment, a single-quoted string), so a JSON file with such a
// mistake would be accepted as its author did not write it. A document
// whose first non-blank characters are { and " is taken as JSON; a YAML
// flow mapping with bare keys ({clusterID: c}) is still YAML. The error
// gives the line and column of the mistake, never the text there.
func checkJSON(data []byte) error {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if !bytes.HasPrefix(trimmed, []byte("{")) || !bytes.HasPrefix(bytes.TrimLeft(trimmed[1:], " \t\r\n"), []byte(`"`)) {
		return nil
	}
	var v any
	err := json.NewDecoder(bytes.NewReader(data)).Decode(&v) // the first value: checkOneDocument reports what follows it
	var syntax *json.SyntaxError
	if !errors.As(err, &syntax) {
		return nil // valid JSON, or a mistake the YAML reading reports
	}
	line, col := lineColumn(data, syntax.Offset-1) // Offset counts the offending byte
	return fmt.Errorf("line %d, column %d: the cloud-config begins as JSON ({\") but is not valid JSON there (a trailing comma, a comment or a quote missing?): expected JSON throughout, or YAML", line, col)
}

// lineColumn is the 1-based line and column of byte offset off of data
// (0-based).
func lineColumn(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// readConfig reads all of r, up to maxConfigSize bytes.
func readConfig(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if len(data) <= maxConfigSize {
		return data, nil
	}
	size := "more than " + strconv.Itoa(maxConfigSize)
	switch s := r.(type) {
	case interface{ Stat() (fs.FileInfo, error) }: // *os.File
		if fi, err := s.Stat(); err == nil && fi.Mode().IsRegular() {
			size = strconv.FormatInt(fi.Size(), 10)
		}
	case interface{ Len() int }: // *strings.Reader, *bytes.Reader, *bytes.Buffer
		size = strconv.Itoa(len(data) + s.Len())
	}
	return nil, fmt.Errorf("the cloud-config is %s bytes: expected at most %d bytes", size, maxConfigSize)
}

// decodeStrict decodes YAML (or JSON) into the struct pointer into.
//
// sigs.k8s.io/yaml's UnmarshalStrict converts YAML to JSON using the
// target's types (so an unquoted 123 decodes into a string field as "123"
// rather than failing as a number; YAML 1.1 booleans and non-decimal numbers
// are still resolved first, see DecodeConfig) and rejects unknown and
// duplicate fields, but it matches field names as
// encoding/json does: without regard to case, so "clusterId" would fill a
// field tagged "clusterID". checkFieldCase then rejects every key that is
// not spelled exactly as its json tag.
//
// The same walk decodes every Duration field first, so that a malformed
// duration is reported with its field path (encoding/json would not name
// the field).
//
// sigs.k8s.io/yaml reads the first YAML document only; checkOneDocument
// rejects the rest. Every library error is rebuilt by yamlError or
// jsonError, which never quote a value.
func decodeStrict(data []byte, into any) error {
	if err := checkJSON(data); err != nil {
		return err
	}
	fields := fieldNames(reflect.TypeOf(into))
	var generic any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return yamlError(err, fields, data)
	}
	if err := checkOneDocument(data, fields); err != nil {
		return err
	}
	if err := checkFieldCase(generic, reflect.TypeOf(into), ""); err != nil {
		return err
	}
	err := yaml.UnmarshalStrict(data, into)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case strings.HasPrefix(err.Error(), "error converting YAML to JSON: ") && !errors.As(err, &typeErr):
		return yamlError(err, fields, data)
	default:
		return jsonError(err)
	}
}

// checkOneDocument returns an error naming the first non-empty YAML
// document after the first one. Empty documents (a trailing "---") hold
// nothing that could be ignored and are accepted.
func checkOneDocument(data []byte, fields map[string]bool) error {
	dec := yamlv2.NewDecoder(bytes.NewReader(data))
	for n := 1; ; n++ {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if n == 1 {
			continue // decoded, and its errors reported, by the caller
		}
		if err != nil {
			return fmt.Errorf("YAML document %d: %w", n, yamlError(err, fields, nil))
		}
		if doc != nil {
			return fmt.Errorf("YAML document %d is not empty: expected a single document (remove the \"---\" line that starts document %d, and what follows)", n, n)
		}
	}
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	durationType    = reflect.TypeFor[Duration]()
)

// checkFieldCase walks the decoded document v along the Go type t and
// returns an error for the first object key that matches a field of t only
// when case is ignored. Types that decode themselves are not inspected.
func checkFieldCase(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType && v != nil {
		raw, err := json.Marshal(v)
		if err == nil {
			err = new(Duration).UnmarshalJSON(raw)
		}
		if err != nil {
			// Not err: Duration's own error quotes the value.
			return fmt.Errorf("%s: %w", strings.TrimSuffix(path, "."), durationError(v))
		}
		return nil
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return checkText(v, t, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		fields := map[string]reflect.Type{}
		collectJSONFields(t, fields)
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			ft, ok := fields[key]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, key) {
						return fmt.Errorf("unknown field %q: field names are case-sensitive: expected %q", path+clip.Quoted(key), path+name)
					}
				}
				continue // yaml.UnmarshalStrict has accepted it: an ignored field ("-")
			}
			if err := checkFieldCase(obj[key], ft, path+key+"."); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		list, _ := v.([]any)
		for i, e := range list {
			if err := checkFieldCase(e, t.Elem(), fmt.Sprintf("%s[%d].", strings.TrimSuffix(path, "."), i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, _ := v.(map[string]any)
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			if err := checkFieldCase(obj[key], t.Elem(), fmt.Sprintf("%s[%s].", strings.TrimSuffix(path, "."), pathKey(key))); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkText decodes v, a string in the document, with the UnmarshalText of
// t (such as instances.State) and returns its error prefixed with the
// field path, which encoding/json would not name. The type's own error is
// kept as it wrote it, as jsonError keeps an UnmarshalJSON error. A value
// that is not a string is left to the strict decode, which names its kind.
func checkText(v any, t reflect.Type, path string) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
		return fmt.Errorf("%s: %w", strings.TrimSuffix(path, "."), err)
	}
	return nil
}

// pathKey spells a map key in a field path: cut to a bounded length, and
// quoted when it holds anything but letters, digits, '-' and '_', so a key
// cannot forge a log line or a path.
func pathKey(key string) string {
	for _, r := range key {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_' {
			return quote(key)
		}
	}
	return clip.Quoted(key)
}

// collectJSONFields records the JSON name and type of each exported field
// of struct type t, following encoding/json's rules for embedded structs.
func collectJSONFields(t reflect.Type, into map[string]reflect.Type) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" && tag == "-" {
			continue
		}
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				collectJSONFields(ft, into)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, seen := into[name]; !seen {
			into[name] = f.Type
		}
	}
}
