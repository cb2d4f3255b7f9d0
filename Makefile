# The test command CI runs (see README.md).
GO ?= go

.PHONY: test vet race large notice fuzz bench modules

test: vet race large notice fuzz modules

vet:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	@# The library builds beyond Linux (shared memory and polling are Linux/Unix only).
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) build ./...

race:
	$(GO) test -race -timeout 20m ./...

# Nested modules (their own go.mod, so ./... above does not reach them):
# store/etcdstore, whose tests start a real etcd server (Debian's etcd-server,
# installed by .ci/run); examples/prometheus, whose test scrapes a job of
# ranks with the Prometheus client.
MODULES ?= store/etcdstore examples/prometheus
modules:
	@for m in $(MODULES); do \
	  echo "module $$m"; \
	  (cd $$m && $(GO) vet ./... && GOOS=darwin $(GO) vet ./... && GOOS=windows $(GO) build ./... && $(GO) test -race -timeout 10m ./...) || exit 1; \
	done

# The large AllReduce matrix (every type and op at 1000003 elements, n = 1..9
# and 16) is too slow under the race detector, which runs a subset of it.
large:
	$(GO) test -count=1 -run '^TestAllReduceLarge$$' .

# The failure-notice tests' 20 trials of each kill (the race stage runs 4:
# see trials in failnotice_test.go), without the race detector.
notice:
	$(GO) test -count=1 -run '^TestFailureNotice' .

# Each fuzz target for a bounded number of inputs (FUZZTIME, default 3000x;
# a count rather than a duration, which ends cleanly). Only packages with a
# "func Fuzz" in a test file are listed (listing builds the package's
# tests), and go test -list says which targets this platform builds.
FUZZTIME ?= 3000x
fuzz:
	@for pkg in $$($(GO) list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r p d; do \
	    grep -qs '^func Fuzz' "$$d"/*_test.go && echo "$$p"; done); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
