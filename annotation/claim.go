package annotation

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// This file holds the prefixes a Set claims and what Validate reports
// under them: an annotation that is not declared, with the declared one
// it most likely means.

// ClaimPrefix declares that every annotation name beginning with prefix
// belongs to the set, so that Validate reports an annotation under it that
// is not declared (a misspelt or wrongly cased key: "lb.example.com/helth-check",
// "lb.example.com/Health-Check") instead of ignoring it. It is opt-in,
// because a prefix may be shared: claim only one this provider alone
// uses, such as "lb.example.com/" or "service.beta.kubernetes.io/acme-",
// never one where other providers' or Kubernetes' annotations live. The
// prefix is matched without regard to ASCII case, as the API server
// checks an annotation key's DNS prefix in lower case
// ("LB.example.com/x" is under "lb.example.com/"); a key under no
// claimed prefix is ignored by Validate, even one that is a declared
// name but for case.
//
// prefix must be the start of a qualified name up to and including the
// "/" after its DNS prefix, which must be lower case, optionally followed
// by the start of the name ("lb.example.com/", "example.com/acme-"),
// and leave room for a name after it; it must not be a Kubernetes domain
// alone (kubernetes.io, k8s.io and their subdomains, followed by "/"
// only), nor claimed already. Errors start "annotation.Set.ClaimPrefix: "
// and name the prefix and what was expected. A prefix may be claimed
// before or after the annotations under it are declared. Like Declare,
// ClaimPrefix is not safe for concurrent use.
func (s *Set) ClaimPrefix(prefix string) error {
	if err := s.claim(prefix); err != nil {
		return fmt.Errorf("annotation.Set.ClaimPrefix: %w", err)
	}
	return nil
}

// MustClaimPrefix is ClaimPrefix that panics on error. It is meant for
// package-level declarations, where an error is a programming mistake.
func (s *Set) MustClaimPrefix(prefix string) {
	if err := s.ClaimPrefix(prefix); err != nil {
		panic(err)
	}
}

// Prefixes returns the claimed prefixes (ClaimPrefix), sorted, in a new
// slice; nil for a nil *Set or when none is claimed.
func (s *Set) Prefixes() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.prefixes)
}

// claim is ClaimPrefix without the error prefix.
func (s *Set) claim(prefix string) error {
	const want = `the start of a qualified name up to and including the "/" after its DNS prefix, such as "lb.example.com/" or "service.beta.kubernetes.io/acme-"`
	domain, name, found := strings.Cut(prefix, "/")
	if !found {
		return fmt.Errorf("prefix %q: expected %s", cut(prefix), want)
	}
	if errs := validation.IsQualifiedName(prefix + "x"); len(errs) > 0 {
		return fmt.Errorf("prefix %q: expected %s, followed by a name: %s", cut(prefix), want, strings.Join(errs, "; "))
	}
	if name == "" && kubernetesDomain(domain) {
		return fmt.Errorf("prefix %q: expected a prefix this provider alone uses, such as %q (Kubernetes and other providers annotate under %q)", prefix, prefix+"acme-", prefix)
	}
	i, dup := slices.BinarySearch(s.prefixes, prefix)
	if dup {
		return fmt.Errorf("prefix %q: already claimed by this set: expected each prefix claimed once", prefix)
	}
	s.prefixes = slices.Insert(s.prefixes, i, prefix)
	return nil
}

// kubernetesDomain reports whether domain is kubernetes.io, k8s.io or one
// of their subdomains, where Kubernetes and every provider annotate.
func kubernetesDomain(domain string) bool {
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// maxUndeclared bounds the undeclared annotations Validate reports one by
// one; it counts the others in one more error.
const maxUndeclared = 10

// undeclared returns an *Error for each annotation of annotations that is
// under a claimed prefix but not declared, sorted by key, at most
// maxUndeclared of them, and the number of the others. Its work is linear
// in the number of annotations (times the few claimed prefixes), but for
// the reported ones, each compared with the declared names of about its
// length (suggest).
func (s *Set) undeclared(annotations map[string]string) ([]*Error, int) {
	if len(s.prefixes) == 0 {
		return nil, 0
	}
	var keys []string
	for k := range annotations {
		if _, ok := s.byName[k]; !ok && s.claimant(k) != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	more := 0
	if len(keys) > maxUndeclared {
		keys, more = keys[:maxUndeclared], len(keys)-maxUndeclared
	}
	errs := make([]*Error, len(keys))
	for i, k := range keys {
		p := s.claimant(k)
		errs[i] = &Error{Name: k, Value: annotations[k], Prefix: p, Expected: s.suggest(k, p)}
	}
	return errs, more
}

// claimant returns the longest claimed prefix key begins with (without
// regard to ASCII case), or "".
func (s *Set) claimant(key string) string {
	best := ""
	for _, p := range s.prefixes {
		if len(p) > len(best) && hasPrefixFold(key, p) {
			best = p
		}
	}
	return best
}

// suggest is the Expected of the undeclared key under the claimed prefix
// p: the declared name that differs from key only by case; else the
// declared name under p closest to key within a small edit distance (at
// most 2, and at most a third of the length of the name after p), the
// least by name of the closest; else the first declared names under p.
func (s *Set) suggest(key, p string) string {
	folded := lower(key)
	if name, ok := s.byFold[folded]; ok {
		return fmt.Sprintf("%q (annotation names are case-sensitive)", name)
	}
	if name, ok := s.closest(folded, p); ok {
		return fmt.Sprintf("a declared annotation, such as %q", name)
	}
	var under []string
	i, _ := slices.BinarySearchFunc(s.list, p, func(a *Annotation, p string) int { return strings.Compare(a.Name, p) })
	for ; i < len(s.list) && len(under) < 3 && strings.HasPrefix(s.list[i].Name, p); i++ {
		under = append(under, strconv.Quote(s.list[i].Name))
	}
	switch len(under) {
	case 0:
		return "no annotation under it: none is declared there"
	case 1:
		return "a declared annotation, such as " + under[0]
	}
	return "a declared annotation, such as " + strings.Join(under[:len(under)-1], ", ") + " or " + under[len(under)-1]
}

// closest returns the declared name under p nearest to folded (a key in
// lower case) by edit distance, within the bound suggest states. Only
// the names whose length is within the bound of the key's are compared.
func (s *Set) closest(folded, p string) (string, bool) {
	k := min(2, (len(folded)-len(p))/3)
	if k < 1 {
		return "", false
	}
	best, bestD := "", k+1
	key := folded[len(p):] // the prefix is the same, but for case
	var rows distanceRows
	for n := len(folded) - k; n <= len(folded)+k; n++ {
		for _, name := range s.byLen[n] {
			if !hasPrefixFold(name, p) {
				continue
			}
			if d := rows.distance(key, lower(name[len(p):]), k); d < bestD || (d == bestD && name < best) {
				best, bestD = name, d
			}
		}
	}
	return best, bestD <= k
}

// distanceRows are the three rows of the table distance computes, kept
// from one call to the next.
type distanceRows struct{ prev2, prev, cur []int }

// distance returns the edit distance of a and b (insertions, deletions,
// substitutions and transpositions of adjacent bytes: the optimal string
// alignment distance), or k+1 when it is more than k. It computes only
// the diagonal band of width 2k+1, so its work is len(a) times k.
func (rs *distanceRows) distance(a, b string, k int) int {
	inf := k + 1
	if len(a)-len(b) > k || len(b)-len(a) > k {
		return inf
	}
	m := len(b)
	if len(rs.cur) < m+1 {
		rs.prev2, rs.prev, rs.cur = make([]int, m+1), make([]int, m+1), make([]int, m+1)
	}
	prev2, prev, cur := rs.prev2[:m+1], rs.prev[:m+1], rs.cur[:m+1]
	for j := range prev {
		prev[j] = min(j, inf)
	}
	for i := 1; i <= len(a); i++ {
		lo, hi := max(1, i-k), min(m, i+k)
		cur[0] = min(i, inf)
		if lo > 1 {
			cur[lo-1] = inf
		}
		best := cur[0]
		if lo > 1 {
			best = inf
		}
		for j := lo; j <= hi; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, prev2[j-2]+1)
			}
			cur[j] = min(d, inf)
			best = min(best, cur[j])
		}
		if hi < m {
			cur[hi+1] = inf
		}
		if best > k {
			return inf
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[m]
}

// lower returns s with ASCII upper-case letters in lower case (a
// qualified name is ASCII).
func lower(s string) string {
	if !strings.ContainsFunc(s, isUpper) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if isUpper(rune(c)) {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func isUpper(r rune) bool { return r >= 'A' && r <= 'Z' }

// hasPrefixFold reports whether s begins with p without regard to ASCII
// case.
func hasPrefixFold(s, p string) bool {
	if len(s) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		x, y := s[i], p[i]
		if isUpper(rune(x)) {
			x += 'a' - 'A'
		}
		if isUpper(rune(y)) {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
