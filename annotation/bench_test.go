package annotation_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/ccmkit/ccmkit/annotation"
)

// BenchmarkDeclareEnum declares one enum annotation of n values, per port
// and with a Default, so that every check made per value is in the
// figure: its time per value must not grow with n (linear declaration).
func BenchmarkDeclareEnum(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		values := make([]string, n)
		for i := range values {
			values[i] = "value-" + strconv.Itoa(i)
		}
		a := annotation.Annotation{Name: "lb.example.com/zone", Kind: annotation.KindEnum, Values: values, Default: values[n-1], PerPort: true, Doc: "d"}
		b.Run(fmt.Sprintf("values=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var set annotation.Set
				if _, err := set.Declare(a); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/value")
		})
	}
}
