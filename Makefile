# The one test command: make test (what CI runs).
GO ?= go

.PHONY: test fmt-check imports-check vet staticcheck unit fuzz build bench netns valkey faults soak soak-short

test: fmt-check imports-check vet staticcheck fuzz unit

# goimports with this module as its own group: standard library first, then
# other modules, then ours. Pinned, fetched through the module proxy once.
GOIMPORTS ?= $(GO) run golang.org/x/tools/cmd/goimports@v0.52.0

imports-check:
	@out=$$($(GOIMPORTS) -local github.com/danmaku/danmaku -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "goimports -local github.com/danmaku/danmaku needed:"; echo "$$out"; exit 1; fi

fmt-check:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# staticcheck's default checks, with U1000 (unused code) named so it stays
# on whatever the defaults become. Pinned, fetched through the module
# proxy once; not in go.mod.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

staticcheck:
	$(STATICCHECK) -checks inherit,U1000 ./...

unit:
	$(GO) test -race -count=1 -timeout 15m ./...

# Short runs of the fuzz targets beyond their committed seed corpora
# (which the unit tests already run): the comet's client JSON frame parser,
# the WebSocket frame-header reader (comet/internal/wsframe), and the
# send body and send frame scanners (internal/sendpath) and the envelope
# and send answer encoders (root package) against encoding/json. The budgets are
# execution counts, a few seconds each on two cores: with a duration budget
# the fuzzing coordinator can fail a clean run with "context deadline
# exceeded" when a worker is mid-input as the time runs out.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseFrame$$' -fuzztime 50000x ./comet/
	$(GO) test -run '^$$' -fuzz '^FuzzFrameConn$$' -fuzztime 30000x ./comet/internal/wsframe/
	$(GO) test -run '^$$' -fuzz '^FuzzScanSend$$' -fuzztime 20000x ./logic/
	$(GO) test -run '^$$' -fuzz '^FuzzScanSendFrame$$' -fuzztime 20000x ./internal/sendpath/
	$(GO) test -run '^$$' -fuzz '^FuzzAppendEnvelope$$' -fuzztime 10000x .
	$(GO) test -run '^$$' -fuzz '^FuzzAppendAnswers$$' -fuzztime 10000x .

build:
	$(GO) build ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Roles on separate hosts: every role in a network namespace of its own, a
# short load through them (scripts/netns.sh). Needs root; CI runs it after
# test.
netns:
	scripts/netns.sh

# The Redis-facing tests again on Valkey (Debian bookworm-backports:
# valkey-server 8): route's tests, the test server's own check that it runs
# Valkey, and one end-to-end test of the role binaries. A missing
# valkey-server fails the run. CI runs it after test.
valkey:
	DANMAKU_TEST_REDIS_SERVER=valkey-server $(GO) test -race -count=1 ./route/ ./internal/testkit/redisserver/
	DANMAKU_TEST_REDIS_SERVER=valkey-server $(GO) test -count=1 -run '^TestRolesSeparately$$' ./e2e/

# Network faults between live processes (e2e/faults, build tag faults):
# the roles on hosts of their own (network namespaces), links cut, delayed
# and made lossy while messages flow, exact accounting at the viewers.
# Needs root, iproute2 and iptables. CI runs it after netns.
faults:
	$(GO) vet -tags faults ./e2e/faults/
	$(GO) test -tags faults -count=1 -timeout 20m -run '^TestNet' ./e2e/faults/

# The soak: the same stack at moderate load for SOAK_DURATION (30 minutes)
# with a nemesis picking a fault every minute; SOAK_REPORT=file keeps the
# samples. soak-short is CI's 3-minute variant.
SOAK_DURATION ?= 30m
soak:
	SOAK_DURATION=$(SOAK_DURATION) $(GO) test -tags faults -count=1 -timeout 60m -v -run '^TestSoak$$' ./e2e/faults/

soak-short:
	SOAK_DURATION=3m $(GO) test -tags faults -count=1 -timeout 12m -v -run '^TestSoak$$' ./e2e/faults/
