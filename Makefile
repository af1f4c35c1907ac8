# The one test command: make test (what CI runs).
GO ?= go

.PHONY: test fmt-check vet unit build bench

test: fmt-check vet unit

fmt-check:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 -timeout 15m ./...

build:
	$(GO) build ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
