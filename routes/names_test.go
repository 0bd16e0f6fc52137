package routes_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/routes"
)

func mustNamer(t testing.TB, f routes.NamerOptions) *routes.Namer {
	t.Helper()
	n, err := routes.NewNamer(f)
	if err != nil {
		t.Fatalf("NewNamer(%+v): %v", f, err)
	}
	return n
}

func TestNamerRoundTrip(t *testing.T) {
	cases := []struct {
		name, reason, hint, cidr string
	}{
		{"uid ipv4", "the route controller's nameHint is a node UID", uidA, "10.244.1.0/24"},
		{"uid ipv6", "the same node's IPv6 CIDR", uidA, "fd00:10:244:1::/64"},
		{"uid ipv6 long", "a full-length IPv6 prefix", uidB, "fd00:1234:5678:9abc:def0:1234:5678:9abc/128"},
		{"host bits", "a CIDR with host bits keeps its spelling", uidA, "10.244.1.7/24"},
		{"padded ipv6", "a non-canonical spelling is stored byte for byte", uidA, "fd00:0010::/64"},
		{"uppercase hint", "a hint that is not a canonical UID is stored byte for byte", "0D4C5F1E-8F4A", "10.0.0.0/8"},
		{"short hint", "any nameHint", "node-a", "10.0.0.0/8"},
		{"empty", "empty strings are names too (validation is the Table's)", "", ""},
		{"mapped", "an IPv4-mapped IPv6 prefix", uidA, "::ffff:10.1.2.0/120"},
	}
	n := mustNamer(t, routes.NamerOptions{Prefix: "k8s-"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := n.Name(c.hint, c.cidr)
			if len(name) > defaultMaxNameLength || !strings.HasPrefix(name, "k8s-") {
				t.Fatalf("%s: Name = %q (%d bytes), want the prefix and at most %d bytes", c.reason, name, len(name), defaultMaxNameLength)
			}
			if strings.Trim(name[len("k8s-"):], defaultAlphabet) != "" {
				t.Errorf("%s: Name = %q uses characters outside the alphabet", c.reason, name)
			}
			if name != n.Name(c.hint, c.cidr) {
				t.Errorf("%s: Name is not deterministic", c.reason)
			}
			got, err := n.Parse(name)
			if err != nil {
				t.Fatalf("%s: Parse(%q): %v", c.reason, name, err)
			}
			if diff := cmp.Diff(routes.NameKey{NameHint: c.hint, CIDR: c.cidr}, got); diff != "" {
				t.Errorf("%s: Parse (-want +got):\n%s", c.reason, diff)
			}
		})
	}
}

func TestNamerDualStackNamesDiffer(t *testing.T) {
	n := mustNamer(t, routes.NamerOptions{})
	v4, v6 := n.Name(uidA, "10.244.1.0/24"), n.Name(uidA, "fd00:10:244:1::/64")
	if v4 == v6 {
		t.Fatalf("a dual-stack node's two CIDRs share nameHint %q and got the same name %q", uidA, v4)
	}
	if n.Name(uidA, "10.244.1.0/24") == n.Name(uidB, "10.244.1.0/24") {
		t.Error("two nodes with the same CIDR got the same name")
	}
}

func TestNamerHashedForm(t *testing.T) {
	n := mustNamer(t, routes.NamerOptions{Prefix: "kubernetes-cluster-one-", MaxLength: 48})
	name := n.Name(uidA, "fd00:10:244:1::/64") // 34 bytes: too long for 48 - 23
	if len(name) != 48 {
		t.Errorf("hashed name %q has %d bytes, want all of MaxLength 48", name, len(name))
	}
	if _, err := n.Parse(name); !errors.Is(err, routes.ErrHashedName) {
		t.Errorf("Parse(hashed) = %v, want ErrHashedName", err)
	}
	if !owns(n, name) {
		t.Errorf("Owns(%q) = false for a hashed name it made", name)
	}
	if other := n.Name(uidA, "fd00:10:244:2::/64"); other == name {
		t.Error("two CIDRs got the same hashed name")
	}
	if short := n.Name("n1", "10.0.0.0/8"); short[len("kubernetes-cluster-one-")] != 'r' {
		t.Errorf("Name(n1, 10.0.0.0/8) = %q: a key that fits must stay reversible", short)
	}
	// A non-canonical (uppercase) UID is stored raw and no longer fits 63.
	long := mustNamer(t, routes.NamerOptions{}).Name(strings.ToUpper(uidA), "10.0.0.0/8")
	if _, err := mustNamer(t, routes.NamerOptions{}).Parse(long); !errors.Is(err, routes.ErrHashedName) || len(long) > 63 {
		t.Errorf("Name(uppercase UID) = %q, Parse: %v; want a hashed name within 63 bytes", long, err)
	}
}

func TestNamerAlphabet(t *testing.T) {
	const upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	n := mustNamer(t, routes.NamerOptions{Alphabet: upper, MaxLength: 80})
	name := n.Name(uidA, "fd00:10:244:1::/64")
	if strings.Trim(name, upper) != "" || name[0] != 'R' {
		t.Errorf("Name = %q, want only %q characters, starting with the reversible marker 'R'", name, upper)
	}
	if k, err := n.Parse(name); err != nil || k.CIDR != "fd00:10:244:1::/64" {
		t.Errorf("Parse(%q) = %+v, %v", name, k, err)
	}
	if _, err := mustNamer(t, routes.NamerOptions{}).Parse(name); !errors.Is(err, routes.ErrForeignName) {
		t.Errorf("a namer with another alphabet parsed %q: %v, want ErrForeignName", name, err)
	}
}

func TestNamerParseForeign(t *testing.T) {
	n := mustNamer(t, routes.NamerOptions{Prefix: "k8s-"})
	good := n.Name(uidA, "10.244.1.0/24")
	cases := []struct{ name, reason, in string }{
		{"no prefix", "another tool's route", "default-route"},
		{"prefix only", "nothing after the prefix", "k8s-"},
		{"bad marker", "neither reversible nor hashed", "k8s-x" + good[5:]},
		{"bad base32", "characters outside the alphabet", "k8s-r0189"},
		{"truncated", "a body that decodes to an incomplete key", good[:len(good)-4]},
		{"trailing garbage", "a body longer than the key", good + "aaaaaaaa"},
		{"hash wrong length", "hashed names have a fixed length", "k8s-habc"},
		{"upper case", "the alphabet is case-sensitive", strings.ToUpper(good)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if k, err := n.Parse(c.in); !errors.Is(err, routes.ErrForeignName) {
				t.Errorf("%s: Parse(%q) = %+v, %v; want ErrForeignName", c.reason, c.in, k, err)
			}
			if owns(n, c.in) {
				t.Errorf("%s: Owns(%q) = true", c.reason, c.in)
			}
		})
	}
}

func TestNewNamerValidates(t *testing.T) {
	cases := []struct {
		name, reason, wantInMsg string
		f                       routes.NamerOptions
	}{
		{"short alphabet", "base32 needs 32 symbols", "expected exactly 32", routes.NamerOptions{Alphabet: "abc"}},
		{"repeated symbol", "symbols must be distinct to decode", "repeats", routes.NamerOptions{Alphabet: "aacdefghijklmnopqrstuvwxyz234567"}},
		{"space", "names never contain spaces", "printable ASCII", routes.NamerOptions{Alphabet: " bcdefghijklmnopqrstuvwxyz234567"}},
		{"padding", "'=' is base32 padding", "printable ASCII", routes.NamerOptions{Alphabet: "=bcdefghijklmnopqrstuvwxyz234567"}},
		{"negative length", "a length is positive", "MaxLength -1", routes.NamerOptions{MaxLength: -1}},
		{"no room", "a hashed name needs 16 characters after prefix and marker", "room for at least 17", routes.NamerOptions{Prefix: "0123456789", MaxLength: 26}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := routes.NewNamer(c.f)
			if err == nil || n != nil || !strings.Contains(err.Error(), c.wantInMsg) || !strings.Contains(err.Error(), "routes.NewNamer: NamerOptions.") {
				t.Errorf("%s: NewNamer(%+v) = %v, %v; want an error naming the field and mentioning %q", c.reason, c.f, n, err, c.wantInMsg)
			}
		})
	}
	// MaxLength 0 is 63: room for a hashed name (marker and 16
	// characters) after a prefix of 46 bytes, not of 47.
	if _, err := routes.NewNamer(routes.NamerOptions{Prefix: strings.Repeat("p", defaultMaxNameLength-17)}); err != nil {
		t.Errorf("zero MaxLength, prefix of %d bytes: %v; want the default length %d to leave room", defaultMaxNameLength-17, err, defaultMaxNameLength)
	}
	if _, err := routes.NewNamer(routes.NamerOptions{Prefix: strings.Repeat("p", defaultMaxNameLength-16)}); err == nil {
		t.Errorf("zero MaxLength, prefix of %d bytes: no error; want the default length %d to leave no room", defaultMaxNameLength-16, defaultMaxNameLength)
	}
}

var fuzzFormats = []routes.NamerOptions{
	{},
	{Prefix: "k8s-c1-", MaxLength: 40},
	{Prefix: "K", Alphabet: "0123456789ABCDEFGHJKMNPQRSTVWXYZ", MaxLength: 255},
}

// FuzzNameCodec: names stay within the format, map back to exactly their
// input unless hashed, and differ for different inputs.
func FuzzNameCodec(f *testing.F) {
	f.Add(uidA, "10.244.1.0/24", uidA, "fd00:10:244:1::/64")
	f.Add(uidB, "fd00:0010::/64", uidB, "fd00:10::/64")
	f.Add("", "", "\x00", "")
	f.Add("node-a", "10.0.0.0/8", "node-a10.0.0.0/8", "")
	namers := make([]*routes.Namer, len(fuzzFormats))
	for i, nf := range fuzzFormats {
		namers[i] = mustNamer(f, nf)
	}
	f.Fuzz(func(t *testing.T, hint, cidr, hint2, cidr2 string) {
		for i, n := range namers {
			nf := fuzzFormats[i]
			alphabet := nf.Alphabet
			if alphabet == "" {
				alphabet = defaultAlphabet
			}
			name := n.Name(hint, cidr)
			if len(name) > maxNameLength(nf) || !strings.HasPrefix(name, nf.Prefix) || strings.Trim(name[len(nf.Prefix):], alphabet) != "" {
				t.Fatalf("format %d: Name(%q, %q) = %q: outside the format", i, hint, cidr, name)
			}
			k, err := n.Parse(name)
			switch {
			case errors.Is(err, routes.ErrHashedName):
			case err != nil:
				t.Fatalf("format %d: Parse(Name(%q, %q) = %q): %v", i, hint, cidr, name, err)
			case k != (routes.NameKey{NameHint: hint, CIDR: cidr}):
				t.Fatalf("format %d: Parse(Name(%q, %q)) = %+v", i, hint, cidr, k)
			}
			if (hint != hint2 || cidr != cidr2) && n.Name(hint2, cidr2) == name {
				t.Fatalf("format %d: (%q, %q) and (%q, %q) share the name %q", i, hint, cidr, hint2, cidr2, name)
			}
		}
	})
}

// FuzzNameParse: Parse never panics and accepts only names Name makes.
func FuzzNameParse(f *testing.F) {
	n := mustNamer(f, routes.NamerOptions{})
	f.Add(n.Name(uidA, "10.244.1.0/24"))
	f.Add(n.Name(uidA, "fd00:10:244:1::/64"))
	f.Add(n.Name(strings.Repeat("x", 60), "10.0.0.0/8"))
	f.Add("r")
	f.Add("raaaaaaa")
	f.Fuzz(func(t *testing.T, name string) {
		k, err := n.Parse(name)
		switch {
		case err == nil:
			if got := n.Name(k.NameHint, k.CIDR); got != name {
				t.Fatalf("Parse(%q) = %+v, but Name of that is %q", name, k, got)
			}
		case errors.Is(err, routes.ErrHashedName):
			if len(name) > defaultMaxNameLength || !owns(n, name) {
				t.Fatalf("Parse(%q) says hashed, but it is longer than %d or not owned", name, defaultMaxNameLength)
			}
		case !errors.Is(err, routes.ErrForeignName):
			t.Fatalf("Parse(%q) = %v: want ErrForeignName or ErrHashedName", name, err)
		}
	})
}
