# steadydns: `make demo` and `make test` are the two commands (README).
# Both run as root on Linux and install what they need from Debian.

GO      ?= go
BIN     := bin/steadydns
BENCH   := bin/steadydns-bench
PKGS    := ./...

.PHONY: all build generate test demo bench bench-fleet deps clean

all: build

# Two binaries: the server every edge host runs, and the benchmark, kept
# apart so the server does not carry the harness and its chart libraries.
build:
	$(GO) build -o $(BIN) ./cmd/steadydns
	$(GO) build -o $(BENCH) ./cmd/steadydns-bench

# Regenerates the committed bpf2go output; needs clang-19 and libbpf-dev.
generate:
	$(GO) generate ./bpf/...

deps:
	@scripts/deps.sh

test: deps
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 12m $(PKGS)

demo: deps build
	@scripts/demo.sh

# steadydns-bench runs the steadydns built beside it, bin/steadydns.
bench: deps build
	$(BENCH)

# The fleet over NATS: constancy per push and each role's capacity.
bench-fleet: deps build
	$(BENCH) fleet

clean:
	rm -rf bin
