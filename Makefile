# steadydns: `make demo` and `make test` are the two commands (README).
# Both run as root on Linux and install what they need from Debian.

GO      ?= go
BIN     := bin/steadydns
PKGS    := ./...

.PHONY: all build generate test demo bench deps clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/steadydns

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

bench: deps build
	$(BIN) bench

clean:
	rm -rf bin
