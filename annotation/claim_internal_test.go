package annotation

import (
	"math/rand/v2"
	"testing"
)

// TestDistance compares distance, which computes a band of the table,
// with the whole table of the optimal string alignment distance, on
// random strings of a small alphabet. The oracle repeats the recurrence
// on purpose: it is the textbook form, without the band and the bound.
func TestDistance(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, r.IntN(9))
		for i := range b {
			b[i] = "abc"[r.IntN(3)]
		}
		return string(b)
	}
	var rows distanceRows
	for range 20000 {
		a, b, k := word(), word(), r.IntN(4)
		want := min(fullDistance(a, b), k+1)
		if got := rows.distance(a, b, k); got != want {
			t.Fatalf("distance(%q, %q, %d) = %d; want %d", a, b, k, got, want)
		}
	}
}

func fullDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
