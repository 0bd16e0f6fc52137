#!/usr/bin/env bash
# Runs every test of ccmkit: the root module (library, fake, conformance
# suite, examples) and the nested testing/e2e module (a real etcd and
# kube-apiserver on loopback, the example CCM against them) with the race
# detector, and the nested testing/gce module (the conformance suite on
# Google's GCE provider) without it: GCE's own cluster-ID watcher races,
# which testing/gce/README.md explains.
set -euo pipefail
cd "$(dirname "$0")"

echo "== go test -race ./... (root module)"
go test -race -count=1 -timeout 15m ./...

if [ -f testing/e2e/go.mod ]; then
	echo "== go test -race ./... (testing/e2e)"
	go -C testing/e2e test -race -count=1 -timeout 45m ./...
fi

if [ -f testing/gce/go.mod ]; then
	echo "== go test ./... (testing/gce, no -race: see testing/gce/README.md)"
	go -C testing/gce test -count=1 -timeout 15m ./...
fi
