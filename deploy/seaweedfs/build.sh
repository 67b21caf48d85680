#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (the S3-compatible server the Parquet sink's
# tests write to) from its Go module, pinned by this directory's go.mod
# and go.sum, and prints the binary's path. The binary is cached under
# ~/.cache/acsledger (or $XDG_CACHE_HOME/acsledger), keyed by go.sum's
# hash, so a second run skips the build (several minutes on 2 cores).
# This directory is its own module, so the main module's `go test ./...`
# never builds it.
set -euo pipefail
cd "$(dirname "$0")"
sum=$(sha256sum go.sum | cut -c1-16)
out="${XDG_CACHE_HOME:-$HOME/.cache}/acsledger/weed-$sum"
if [ ! -x "$out" ]; then
	mkdir -p "$(dirname "$out")"
	go build -o "$out.tmp" github.com/seaweedfs/seaweedfs/weed
	mv "$out.tmp" "$out"
fi
echo "$out"
