# Targets are listed by `make help`. `make test` is the one command CI runs.
GO ?= go
PKGS ?= ./...

.PHONY: help run test tools check vulncheck unit unit-full drills bench bench-scale bench-10m screenshots fuzz lint

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -e 's/:.*## /\t/' | expand -t 12

run: ## run the service on the embedded store at http://127.0.0.1:8080
	$(GO) run ./cmd/acsledger serve

test: tools check unit unit-full drills ## the whole suite: formatting, vet, staticcheck, race-enabled tests, full-size runs, fault drills (starts its own PostgreSQL and SeaweedFS)

tools: ## build the test servers that come as Go modules (SeaweedFS's weed, cached under ~/.cache/acsledger; minutes the first time)
	@deploy/seaweedfs/build.sh

check: ## gofmt, go vet, staticcheck and govulncheck
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags drills ./internal/drills/...
	$(GO) tool staticcheck $(PKGS)
	$(GO) tool staticcheck -tags drills ./internal/drills/...
	@$(MAKE) --no-print-directory vulncheck

# govulncheck needs the Go vulnerability database (https://vuln.go.dev).
# Only when it cannot be fetched is the check skipped, and it says so; any
# other failure, a vulnerability found included, fails the build.
vulncheck: ## govulncheck ./... (skipped, with a message, only when vuln.go.dev is unreachable)
	@echo "$(GO) tool govulncheck $(PKGS)"; \
	  out=$$($(GO) tool govulncheck $(PKGS) 2>&1); rc=$$?; \
	  if [ $$rc -ne 0 ] && printf '%s\n' "$$out" | grep -q '^govulncheck: fetching vulnerabilities: '; then \
	    echo "govulncheck SKIPPED: the Go vulnerability database is unreachable from this machine:"; \
	    printf '%s\n' "$$out" | grep '^govulncheck: fetching vulnerabilities: '; \
	    exit 0; \
	  fi; \
	  printf '%s\n' "$$out"; exit $$rc

unit: ## go test -race over every package
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

# The race detector slows the embedded store about tenfold, so the tests
# that need volume run at full size here, without it.
unit-full: ## the full-size runs without the race detector (the Parquet sink's 20,000 entries)
	$(GO) test -count=1 -run 'TestParquet' ./internal/exportsink/

# The drills build only with the tag; they run the built binary, kill it,
# stop and cut PostgreSQL, and restore a backup (docs/operations.md, "Drills").
drills: ## fault drills: kill -9 under load and ingest, PostgreSQL restart and cut connections, backup and restore (minutes)
	CI=true $(GO) test -tags drills -count=1 -timeout 20m -v ./internal/drills/...

bench: ## every benchmark once (see docs/benchmarks.md for the recorded runs)
	$(GO) test -run '^$$' -bench . -benchtime 1s $(PKGS)

bench-scale: ## the UI's search and timeline over 1,000,000 entries in a throwaway PostgreSQL (minutes; docs/benchmarks.md)
	ACSLEDGER_BENCH_SCALE=1 CI=true $(GO) test -run '^$$' -bench Scale -benchtime 1x -timeout 30m ./web/

bench-10m: ## append, session read, search and proof latency at 1M..10M entries in a throwaway PostgreSQL (an hour or more; docs/benchmarks.md)
	ACSLEDGER_BENCH_10M=1 CI=true $(GO) test -run '^$$' -bench TenMillion -benchtime 1x -timeout 6h ./ledger/pgstore/

screenshots: ## the UI journeys in Chromium, saving their screenshots in docs/screenshots
	mkdir -p docs/screenshots
	ACSLEDGER_SCREENSHOTS=$(CURDIR)/docs/screenshots CI=true $(GO) test -count=1 -run 'TestJourney|TestLayouts' ./web/ui/

lint: check ## alias of check
