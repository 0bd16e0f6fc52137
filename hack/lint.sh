#!/usr/bin/env bash
# Runs golangci-lint, pinned below, on every module of ccmkit with the
# repository's .golangci.yml. It is fetched and built by `go run` (from the
# module proxy, cached by the Go build cache), so nothing is installed.
# Usage: hack/lint.sh [golangci-lint run flags...]
set -euo pipefail
cd "$(dirname "$0")/.."

# Bump deliberately: a new version brings new checks.
GOLANGCI_LINT=github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

root=$(pwd)
status=0
for mod in . testing/e2e testing/gce; do
	[ -f "$mod/go.mod" ] || continue
	echo "-- golangci-lint ($mod)"
	(cd "$mod" && go run "$GOLANGCI_LINT" run --config "$root/.golangci.yml" "$@" ./...) || status=1
done
exit $status
