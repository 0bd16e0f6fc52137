package loadbalancer_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

const upperLowerDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-"

func mustNamer(t testing.TB, cfg loadbalancer.NamerOptions) *loadbalancer.Namer {
	t.Helper()
	n, err := loadbalancer.NewNamer(cfg)
	if err != nil {
		t.Fatalf("NewNamer(%+v): %v", cfg, err)
	}
	return n
}

func TestNewNamerErrors(t *testing.T) {
	cases := []struct {
		name, reason string
		cfg          loadbalancer.NamerOptions
		wantSubstr   string
	}{
		{"too short", "no room for prefix, separator and hash", loadbalancer.NamerOptions{MaxLength: 16}, "loadbalancer.NewNamer: NamerOptions.MaxLength 16: expected 0 (the default, 63) or at least 17"},
		{"negative length", "negative is an error (A4), never the default", loadbalancer.NamerOptions{MaxLength: -3}, "loadbalancer.NewNamer: NamerOptions.MaxLength -3: expected 0 (the default, 63) or at least 17"},
		{"no separator", "'-' joins the parts", loadbalancer.NamerOptions{Charset: "abcdefghijklmnopqrstuvwxyz0123456789"}, "separator"},
		{"no hash alphabet", "the hash needs digits and a-v", loadbalancer.NamerOptions{Charset: "abc-"}, "hash alphabet"},
		{"prefix outside charset", "the prefix is written as is", loadbalancer.NamerOptions{Prefix: "K8S"}, `loadbalancer.NewNamer: NamerOptions.Prefix "K8S"`},
		{"non-ASCII charset", "the charset is a byte table", loadbalancer.NamerOptions{Charset: "abcdefghijklmnopqrstuvwxyz0123456789-é"}, "printable ASCII"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadbalancer.NewNamer(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantSubstr) {
				t.Errorf("%s: NewNamer(%+v) error = %v; want it to contain %q", tc.reason, tc.cfg, err, tc.wantSubstr)
			}
		})
	}
}

func TestNameFor(t *testing.T) {
	def := mustNamer(t, loadbalancer.NamerOptions{})
	upper := mustNamer(t, loadbalancer.NamerOptions{Prefix: "LB", MaxLength: 32, Charset: "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"})
	cases := []struct {
		name, reason     string
		namer            *loadbalancer.Namer
		ns, svc          string
		wantReadable     string // the name without its 13-character hash
		wantMaxLen       int
		wantValidDNS1035 bool
	}{
		{"plain", "namespace and name are kept", def, "shop", "web", "k8s-shop-web-", 63, true},
		{"dots", "dots of a DNS subdomain become '-'", def, "a.b", "c..d", "k8s-a-b-c-d-", 63, true},
		{"upper case folded", "only lower case is allowed", def, "Shop", "WEB", "k8s-shop-web-", 63, true},
		{"lower case folded up", "only upper case is allowed", upper, "shop", "web", "LB-SHOP-WEB-", 32, false},
		{"empty", "no readable part", def, "", "", "k8s-", 63, true},
		{"empty namespace", "no leading separator", def, "", "web", "k8s-web-", 63, true},
		{"unicode", "multi-byte runes become one separator", def, "čaj", "ü", "k8s-aj-", 63, true},
		{"long", "truncated to the limit, no trailing separator before the hash", def,
			strings.Repeat("n", 40), strings.Repeat("s", 40), "k8s-" + strings.Repeat("n", 40) + "-" + strings.Repeat("s", 4) + "-", 63, true},
		{"truncated at separator", "a separator at the cut is dropped", upper, strings.Repeat("a", 14), "b", "LB-" + strings.Repeat("A", 14) + "-", 32, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.namer.NameFor("c1", tc.ns, tc.svc, "uid-1")
			if len(got) > tc.wantMaxLen || !loadbalancer.NameFits(tc.namer, got) {
				t.Errorf("%s: %q is longer than %d or invalid", tc.reason, got, tc.wantMaxLen)
			}
			if diff := cmp.Diff(tc.wantReadable, got[:len(got)-13]); diff != "" {
				t.Errorf("%s: readable part (-want +got):\n%s", tc.reason, diff)
			}
			if tc.wantValidDNS1035 {
				if errs := validation.IsDNS1035Label(got); len(errs) > 0 {
					t.Errorf("%s: %q is not a DNS-1035 label: %v", tc.reason, got, errs)
				}
			}
			if again := tc.namer.NameFor("c1", tc.ns, tc.svc, "uid-1"); again != got {
				t.Errorf("%s: not deterministic: %q then %q", tc.reason, got, again)
			}
		})
	}
}

func TestNameIdentity(t *testing.T) {
	n := mustNamer(t, loadbalancer.NamerOptions{})
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}}
	base := n.Name("c1", svc)
	if got := n.NameFor("c1", "ns", "web", "u1"); got != base {
		t.Errorf("Name and NameFor differ: %q vs %q", base, got)
	}
	if got := n.NameFor("c2", "ns", "web", "u1"); got == base {
		t.Errorf("another cluster got the same name %q", got)
	}
	if got := n.NameFor("c1", "ns", "web", "u2"); got == base {
		t.Errorf("a re-created Service (new UID) got the same name %q", got)
	}
}

// TestNamerProperty checks, over 100,000 random (cluster, namespace, name,
// UID) inputs per configuration, that names respect the limit and charset
// and that distinct Services never share a name.
func TestNamerProperty(t *testing.T) {
	const n = 100_000
	configs := []loadbalancer.NamerOptions{
		{},
		{Prefix: "K", MaxLength: 20, Charset: upperLowerDigits},
	}
	// A small alphabet of awkward bytes, and a few clusters, so that
	// readable parts and clusters collide often and only the hash tells
	// Services apart.
	const alphabet = "abcXYZ09-._/ é\x00"
	rng := rand.New(rand.NewPCG(1, 2))
	randStr := func(max int) string {
		b := make([]byte, rng.IntN(max+1))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	type input struct{ cluster, ns, name, uid string }
	inputs := make([]input, n)
	for i := range inputs {
		inputs[i] = input{
			cluster: fmt.Sprintf("cluster-%d", rng.IntN(3)),
			ns:      randStr(12),
			name:    randStr(70),
			uid:     fmt.Sprintf("%016x-%08x", rng.Uint64(), rng.Uint32()),
		}
	}
	for _, cfg := range configs {
		namer := mustNamer(t, cfg)
		owner := make(map[string]int, n)
		for i, in := range inputs {
			name := namer.NameFor(in.cluster, in.ns, in.name, types.UID(in.uid))
			if !loadbalancer.NameFits(namer, name) {
				t.Fatalf("config %+v: input %+v: %q is longer than %d or outside the charset", cfg, in, name, loadbalancer.NamerMaxLength(namer))
			}
			if j, dup := owner[name]; dup && (inputs[j].uid != in.uid || inputs[j].cluster != in.cluster) {
				t.Fatalf("config %+v: %q is the name of both %+v and %+v", cfg, name, inputs[j], in)
			}
			owner[name] = i
		}
		// Same Service, same name.
		for _, in := range inputs[:1000] {
			a := namer.NameFor(in.cluster, in.ns, in.name, types.UID(in.uid))
			if b := namer.NameFor(in.cluster, in.ns, in.name, types.UID(in.uid)); a != b {
				t.Fatalf("config %+v: %+v named %q then %q", cfg, in, a, b)
			}
		}
	}
}
