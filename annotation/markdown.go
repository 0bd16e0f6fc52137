package annotation

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes a Markdown reference of the declared annotations to
// w: a level-1 heading with title, a summary table, and a section per
// annotation (name, type, accepted values, default, whether it is a
// provider setting, and the Doc text). A PerPort annotation's type says
// "per port", its section shows the syntax with an example of its kind
// ("443=true,https=false"), and its default is that of every port not
// listed. The output is deterministic (sorted by name). It returns the
// first write error, unwrapped.
func (s *Set) WriteMarkdown(w io.Writer, title string) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# %s\n\n", title)
	if len(s.list) == 0 {
		fmt.Fprintf(bw, "No annotations are declared.\n")
		return bw.Flush()
	}
	fmt.Fprintf(bw, "| Annotation | Type | Default |\n|---|---|---|\n")
	for _, a := range s.list {
		fmt.Fprintf(bw, "| [`%s`](#%s) | %s | %s |\n", a.Name, anchor(a.Name), a.kindName(), mdDefault(a))
	}
	for _, a := range s.list {
		fmt.Fprintf(bw, "\n## `%s`\n\n", a.Name)
		fmt.Fprintf(bw, "- Type: %s\n", a.kindName())
		if a.PerPort {
			fmt.Fprintf(bw, "- Syntax: `PORT=VALUE,PORT=VALUE,…` (PORT a Service port's number or name), for example `%s`\n", a.example())
		}
		fmt.Fprintf(bw, "- Accepted values: %s\n", a.expected(-1)) // every enum value, uncut
		fmt.Fprintf(bw, "- Default: %s\n", mdDefault(a))
		if a.Setting {
			fmt.Fprintf(bw, "- Provider setting: changing it updates the load balancer\n")
		}
		fmt.Fprintf(bw, "\n%s\n", strings.TrimSpace(a.Doc))
	}
	return bw.Flush()
}

// mdDefault is a's default for the reference: that of every port not
// listed, for a PerPort annotation.
func mdDefault(a *Annotation) string {
	d := "none"
	if a.Default != "" {
		d = "`" + a.Default + "`"
	}
	if a.PerPort {
		d += " for every port not listed"
	}
	return d
}

// anchor is the GitHub-style heading anchor of "`name`".
func anchor(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
