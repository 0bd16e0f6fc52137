#!/usr/bin/env bash
# Measures how routes diffWhole (the whole-reconcile differ) scales: its time on 20,000 dual-stack nodes over
# its time on 5,000 (4.0 is exactly linear), steady state and with 1% churn.
#
# `go test -bench Differ -count N` runs every repetition of one size before
# the next size, so on a shared machine a slow spell lands on one size only
# and skews the ratio. This script runs BenchmarkDiffer in short runs that
# alternate between the sizes (and which goes first), and reports the median
# time of each size, the ratio of the medians, and the spread of the ratios
# of the rounds.
#
# Given routes test binaries (go test -c -o X.test ./routes/, for example of
# two commits), it takes turns between them too, rotating which goes first
# in each round, to compare builds:
#
#   git worktree add /tmp/old <commit> && go -C /tmp/old test -c -o /tmp/old.test ./routes/
#   go test -c -o /tmp/new.test ./routes/
#   hack/diff-linearity.sh 6 1s /tmp/old.test /tmp/new.test
#
# Usage: hack/diff-linearity.sh [rounds [benchtime [test-binary...]]]
# (defaults: 10 rounds, 1s, a fresh build of ./routes)
set -euo pipefail

rounds=${1:-10}
benchtime=${2:-1s}
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
	echo "diff-linearity: rounds must be a positive integer, got '$rounds'" >&2
	exit 2
fi
if ! [[ $benchtime =~ ^([1-9][0-9]*x|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$ ]]; then
	echo "diff-linearity: benchtime must be a Go duration such as 1s or 1m30s, or an iteration count such as 500x, got '$benchtime'" >&2
	exit 2
fi
shift $(($# < 2 ? $# : 2))

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bins=()
for b in "$@"; do
	[[ $b == */* ]] || b=./$b # run it from here, not from PATH
	[[ -f $b && -x $b ]] || { echo "diff-linearity: '$b' is not an executable test binary" >&2; exit 2; }
	bins+=("$b")
done
if ((${#bins[@]} == 0)); then
	(cd "$(dirname "$0")/.." && go test -c -o "$tmp/routes.test" ./routes/)
	bins=("$tmp/routes.test")
fi

run() { # binary nodes level -> ns/op
	if ! "$1" -test.run '^$' -test.bench "^BenchmarkDiffer\$/^nodes=$2\$/^$3\$" -test.benchtime "$benchtime" >"$tmp/out" 2>&1; then
		echo "diff-linearity: $1 failed on nodes=$2/$3:" >&2
		tail -20 "$tmp/out" >&2
		exit 1
	fi
	awk '/^BenchmarkDiffer/ { print $3 }' "$tmp/out"
}

echo "routes diffWhole (the whole-reconcile differ), 20000 vs 5000 dual-stack nodes: $rounds alternating rounds of $benchtime per size, $(getconf _NPROCESSORS_ONLN) CPUs"
for i in "${!bins[@]}"; do
	v=$(go version "${bins[i]}" 2>/dev/null | awk '{ print $2 }') || true
	echo "  build $((i + 1)): ${bins[i]} (${v:-Go version unknown})"
done
for level in steady churn1pct; do
	for ((r = 0; r < rounds; r++)); do
		if ((r % 2)); then order="20000 5000"; else order="5000 20000"; fi
		for ((k = 0; k < ${#bins[@]}; k++)); do
			i=$(((r + k) % ${#bins[@]}))
			for n in $order; do
				ns=$(run "${bins[i]}" "$n" "$level")
				[[ -n $ns ]] || { echo "diff-linearity: no result from ${bins[i]} for nodes=$n/$level" >&2; exit 1; }
				echo "$r $n $ns" >>"$tmp/$level.$i"
			done
		done
	done
	for i in "${!bins[@]}"; do
		label=$level
		((${#bins[@]} == 1)) || label="$level, build $((i + 1))"
		awk -v label="$label" '
			function median(a, n,   i, j, t) {
				for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
				return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
			}
			{ if ($2 == 5000) s[$1] = $3; else l[$1] = $3 }
			END {
				for (r in s) { ns++; S[ns] = s[r]; nl++; L[nl] = l[r]; nr++; R[nr] = l[r] / s[r] }
				ms = median(S, ns); ml = median(L, nl); mr = median(R, nr)
				printf "%-18s  5000: %9.0f ns/op   20000: %10.0f ns/op   ratio of medians %.2f   per round: min %.2f median %.2f max %.2f\n", label, ms, ml, ml / ms, R[1], mr, R[nr]
			}' "$tmp/$level.$i"
	done
done
