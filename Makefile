# Targets are listed by `make help`. `make test` is the one command CI runs.
GO ?= go
PKGS ?= ./...

.PHONY: help run test check unit bench fuzz lint

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -e 's/:.*## /\t/' | expand -t 12

run: ## run the service on the embedded store at http://127.0.0.1:8080
	$(GO) run ./cmd/acsledger serve

test: check unit ## the whole suite: formatting, vet, staticcheck, race-enabled tests (starts its own PostgreSQL)

check: ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

unit: ## go test -race over every package
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

bench: ## every benchmark once (see docs/benchmarks.md for the recorded runs)
	$(GO) test -run '^$$' -bench . -benchtime 1s $(PKGS)

lint: check ## alias of check
