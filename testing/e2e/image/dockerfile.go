package image

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Dockerfile is a parsed Dockerfile: its global build arguments and its
// stages, in order. Parse reads the subset of the format that
// example/Dockerfile uses (FROM, ARG, ENV, WORKDIR, COPY, RUN, LABEL,
// USER, ENTRYPOINT and line continuations) and refuses anything else by
// name, so that the Go builder never silently ignores an instruction that
// `docker build` would honour.
type Dockerfile struct {
	// Name is where the text came from, used in errors.
	Name string
	// Args are the global ARG instructions (before the first FROM), in
	// order.
	Args []Arg
	// Stages are the build stages, in order; the last one is the image.
	Stages []Stage
}

// Arg is an ARG instruction: a build argument and its default.
type Arg struct {
	Name    string
	Default string
	// HasDefault is false for `ARG NAME`, which inherits the global
	// default (in a stage) or is empty.
	HasDefault bool
}

// Stage is one FROM and the instructions that follow it.
type Stage struct {
	// Name is the stage's AS name, or "".
	Name string
	// Base is FROM's image reference, unexpanded.
	Base string
	// Line is FROM's line number.
	Line int
	// Instructions follow FROM, in order (FROM itself excluded).
	Instructions []Instruction
}

// Instruction is one logical line of a Dockerfile.
type Instruction struct {
	// Line is the number of its first physical line.
	Line int
	// Command is the instruction in upper case: "RUN", "COPY", ….
	Command string
	// Flags are the leading --name=value options (COPY --from=build,
	// RUN --mount=…), in order.
	Flags []string
	// Rest is what follows the command and its flags, with continuations
	// joined by a space.
	Rest string
}

// supported are the instructions Parse accepts.
var supported = []string{"FROM", "ARG", "ENV", "WORKDIR", "COPY", "RUN", "LABEL", "USER", "ENTRYPOINT"}

// Parse parses the text of a Dockerfile; name is used in errors.
func Parse(name string, text []byte) (*Dockerfile, error) {
	d := &Dockerfile{Name: name}
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		start := i + 1
		// A trailing backslash continues the instruction; comment lines
		// inside it are dropped, as docker build does.
		for strings.HasSuffix(line, `\`) {
			line = strings.TrimSpace(strings.TrimSuffix(line, `\`))
			i++
			for i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "#") {
				i++
			}
			if i == len(lines) {
				return nil, fmt.Errorf("%s:%d: the instruction ends in a line continuation: expected a next line", name, start)
			}
			line += " " + strings.TrimSpace(lines[i])
		}
		in, err := parseInstruction(name, start, line)
		if err != nil {
			return nil, err
		}
		if err := d.add(in); err != nil {
			return nil, err
		}
	}
	if len(d.Stages) == 0 {
		return nil, fmt.Errorf("%s: no FROM instruction: expected at least one build stage", name)
	}
	return d, nil
}

func parseInstruction(name string, line int, text string) (Instruction, error) {
	cmd, rest, _ := strings.Cut(text, " ")
	in := Instruction{Line: line, Command: strings.ToUpper(cmd)}
	if !slices.Contains(supported, in.Command) {
		return in, fmt.Errorf("%s:%d: instruction %q: expected one of %s (the Go builder does not implement the others)",
			name, line, cmd, strings.Join(supported, ", "))
	}
	rest = strings.TrimSpace(rest)
	for strings.HasPrefix(rest, "--") {
		flag, after, _ := strings.Cut(rest, " ")
		in.Flags = append(in.Flags, flag)
		rest = strings.TrimSpace(after)
	}
	if rest == "" {
		return in, fmt.Errorf("%s:%d: %s has no arguments: expected at least one", name, line, in.Command)
	}
	in.Rest = rest
	return in, nil
}

func (d *Dockerfile) add(in Instruction) error {
	if in.Command == "FROM" {
		f := strings.Fields(in.Rest)
		s := Stage{Base: f[0], Line: in.Line}
		switch {
		case len(f) == 3 && strings.EqualFold(f[1], "AS"):
			s.Name = f[2]
		case len(f) != 1:
			return fmt.Errorf("%s:%d: FROM %q: expected an image, optionally followed by AS and a stage name", d.Name, in.Line, in.Rest)
		}
		d.Stages = append(d.Stages, s)
		return nil
	}
	if len(d.Stages) == 0 {
		if in.Command != "ARG" {
			return fmt.Errorf("%s:%d: %s before the first FROM: expected only ARG there", d.Name, in.Line, in.Command)
		}
		a, err := parseArg(d.Name, in)
		if err != nil {
			return err
		}
		d.Args = append(d.Args, a)
		return nil
	}
	s := &d.Stages[len(d.Stages)-1]
	s.Instructions = append(s.Instructions, in)
	return nil
}

func parseArg(name string, in Instruction) (Arg, error) {
	if strings.ContainsAny(in.Rest, " \t") {
		return Arg{}, fmt.Errorf("%s:%d: ARG %q: expected one NAME or NAME=default", name, in.Line, in.Rest)
	}
	n, def, has := strings.Cut(in.Rest, "=")
	if !validName(n) {
		return Arg{}, fmt.Errorf("%s:%d: ARG name %q: expected letters, digits and underscores", name, in.Line, n)
	}
	def, err := unquote(def)
	if err != nil {
		return Arg{}, fmt.Errorf("%s:%d: ARG %s: %w", name, in.Line, n, err)
	}
	return Arg{Name: n, Default: def, HasDefault: has}, nil
}

func validName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if r != '_' && !letter && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// Stage returns the stage named name.
func (d *Dockerfile) Stage(name string) (*Stage, error) {
	for i := range d.Stages {
		if d.Stages[i].Name == name {
			return &d.Stages[i], nil
		}
	}
	var names []string
	for _, s := range d.Stages {
		if s.Name != "" {
			names = append(names, s.Name)
		}
	}
	return nil, fmt.Errorf("%s: no stage named %q: expected one of %q", d.Name, name, names)
}

// scope is the build arguments visible in a stage: those it declares with
// ARG, with their stage default, else the global default, else the value
// given to the build (buildArgs wins over both defaults).
func (d *Dockerfile) scope(s *Stage, buildArgs map[string]string) (map[string]string, error) {
	global := d.globalScope(buildArgs)
	vars := map[string]string{}
	for _, in := range s.Instructions {
		if in.Command != "ARG" {
			continue
		}
		a, err := parseArg(d.Name, in)
		if err != nil {
			return nil, err
		}
		switch v, ok := buildArgs[a.Name]; {
		case ok:
			vars[a.Name] = v
		case a.HasDefault:
			vars[a.Name] = a.Default
		default:
			vars[a.Name] = global[a.Name]
		}
	}
	return vars, nil
}

// platformArgs are the build arguments BuildKit defines in the global
// scope without an ARG instruction, so that FROM can use them.
var platformArgs = []string{
	"TARGETPLATFORM", "TARGETOS", "TARGETARCH", "TARGETVARIANT",
	"BUILDPLATFORM", "BUILDOS", "BUILDARCH", "BUILDVARIANT",
}

// globalScope returns the variables a FROM line sees: the global ARGs
// (their defaults, or buildArgs' values) and those of platformArgs that
// buildArgs gives. A stage's `ARG NAME` without a default inherits from it.
func (d *Dockerfile) globalScope(buildArgs map[string]string) map[string]string {
	global := map[string]string{}
	for _, name := range platformArgs {
		if v, ok := buildArgs[name]; ok {
			global[name] = v
		}
	}
	for _, a := range d.Args {
		if v, ok := buildArgs[a.Name]; ok {
			global[a.Name] = v
		} else {
			global[a.Name] = a.Default
		}
	}
	return global
}

// expand replaces $NAME and ${NAME} in s with vars; a name not in vars is
// an error, since docker build would silently expand it to "".
func expand(s string, vars map[string]string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		var n string
		switch j := i + 1; {
		case j < len(s) && s[j] == '{':
			end := strings.IndexByte(s[j:], '}')
			if end < 0 {
				return "", fmt.Errorf("%q: unterminated ${: expected ${NAME}", s)
			}
			n = s[j+1 : j+end]
			i = j + end
		default:
			k := j
			for k < len(s) && validName(s[j:k+1]) {
				k++
			}
			n = s[j:k]
			i = k - 1
		}
		v, ok := vars[n]
		if !ok || !validName(n) {
			return "", fmt.Errorf("%q: variable %q: expected one of the ARGs in scope %q", s, n, slices.Sorted(maps.Keys(vars)))
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// words splits a shell-like line into words: whitespace separates them,
// double quotes group (and keep $ expansion), single quotes group
// literally, and a backslash escapes the next character. Anything a shell
// would treat as an operator (; & | < > ` and $( ) is refused: the Go
// builder runs one command, not a script.
func words(s string, vars map[string]string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in := false
	flush := func() {
		if in {
			out = append(out, cur.String())
		}
		cur.Reset()
		in = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("%q: unterminated single quote: expected a closing '", s)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			in = true
		case c == '"':
			end := strings.IndexByte(s[i+1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("%q: unterminated double quote: expected a closing \"", s)
			}
			v, err := expand(s[i+1:i+1+end], vars)
			if err != nil {
				return nil, err
			}
			cur.WriteString(v)
			i += end + 1
			in = true
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			i++
			in = true
		case strings.IndexByte(";&|<>`", c) >= 0 || c == '$' && i+1 < len(s) && s[i+1] == '(':
			return nil, fmt.Errorf("%q: shell operator %q: expected a single command", s, s[i:i+1])
		case c == '$':
			j := i + 1
			for j < len(s) && s[j] != ' ' && s[j] != '\t' && s[j] != '"' && s[j] != '\'' {
				j++
			}
			v, err := expand(s[i:j], vars)
			if err != nil {
				return nil, err
			}
			cur.WriteString(v)
			i = j - 1
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	flush()
	return out, nil
}

// unquote removes one level of double or single quotes around s.
func unquote(s string) (string, error) {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') {
		if s[len(s)-1] != s[0] {
			return "", fmt.Errorf("value %s: expected a closing %c", s, s[0])
		}
		return s[1 : len(s)-1], nil
	}
	return s, nil
}

// jsonList parses the exec form of ENTRYPOINT: a JSON array of strings.
func jsonList(s string) ([]string, error) {
	var l []string
	if err := json.Unmarshal([]byte(s), &l); err != nil || len(l) == 0 {
		return nil, fmt.Errorf("%s: expected the exec form, a non-empty JSON array of strings such as [\"/cloud-controller-manager\"]", s)
	}
	return l, nil
}
