# The one test command: make test (what CI runs).
GO ?= go

.PHONY: test fmt-check vet unit fuzz build bench

test: fmt-check vet fuzz unit

fmt-check:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 -timeout 15m ./...

# A short run of the WebSocket frame parser's fuzz target beyond its
# committed seed corpus (which the unit tests already run).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseFrame$$' -fuzztime 10s ./comet/

build:
	$(GO) build ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
