# steadydns: `make demo` and `make test` are the two commands (README).
# Both run as root on Linux and install what they need from Debian;
# `make check` runs the tests that need no root (CONTRIBUTING.md).

GO      ?= go
BIN     := bin/steadydns
BENCH   := bin/steadydns-bench
PKGS    := ./...

.PHONY: all build generate fmt test check fuzz demo demo-fleet bench bench-fleet deps clean install

# make install [PREFIX=/usr/local] [DESTDIR=]: the server, the systemd unit
# and user, the docs and the examples. The config itself is the operator's:
# /etc/steadydns/steadydns.yaml (docs/operations.md).
PREFIX      ?= /usr/local
DESTDIR     ?=
BINDIR      := $(PREFIX)/bin
DOCDIR      := $(PREFIX)/share/doc/steadydns
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
DOCS        := README.md $(wildcard docs/*.md)

all: build

# Two binaries: the server every edge host runs, and the benchmark, kept
# apart so the server does not carry the harness and its chart libraries.
build:
	$(GO) build -o $(BIN) ./cmd/steadydns
	$(GO) build -o $(BENCH) ./cmd/steadydns-bench

# Regenerates the committed bpf2go output of every package with a
# go:generate line (bpf/, bench/xdpprog/, the selection's test harness);
# needs clang-19 and libbpf-dev.
generate:
	$(GO) generate ./...

deps:
	@scripts/deps.sh

# One package at a time (-p 1): the bench's and the fleet's tests run
# many processes of their own against timing bounds, and on two CPUs the
# CLI's tests beside them made the fleet's aggregators skip pushes.
test: deps fmt
	$(GO) vet $(PKGS)
	$(GO) test -p 1 -count=1 -timeout 12m $(PKGS)

# Every Go file as gofmt writes it; the list names those that are not.
fmt:
	@files=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$files" ]; then echo "not gofmt'ed:" $$files >&2; exit 1; fi

# The tier that needs neither root nor apt-get: every test in -short mode.
# Tests that need root (XDP, network namespaces, bpffs) skip and say why.
check: fmt
	$(GO) vet $(PKGS)
	$(GO) test -short -count=1 -timeout 5m $(PKGS)

# make fuzz [FUZZTIME=30s] [FUZZFLAGS=-parallel=1]: every fuzz target, one
# after another, each for FUZZTIME (docs/fuzzing.md). A failing input is
# written under the package's testdata/fuzz/, where `make test` runs it.
FUZZTIME  ?= 30s
FUZZFLAGS ?=
FUZZ := ./bpf:FuzzXDP ./controlplane/fallback:FuzzServeUDP ./controlplane/fallback:FuzzFastPath ./controlplane/config:FuzzParse \
	./controlplane/zone:FuzzLoad ./prober:FuzzDecode ./controlplane/health:FuzzIngestFrame \
	./controlplane/edge:FuzzMergeTable ./controlplane/transport:FuzzDecodeState \
	./controlplane/transport:FuzzReassemble

fuzz: deps
	@GO="$(GO)" FUZZTIME="$(FUZZTIME)" FUZZFLAGS="$(FUZZFLAGS)" scripts/fuzz.sh $(FUZZ)

demo: deps build
	@scripts/demo.sh

# The same product as a fleet: every role its own process in its own
# namespace, over NATS (docs/fleet.md).
demo-fleet: deps build
	@scripts/demo-fleet.sh

# steadydns-bench runs the steadydns built beside it, bin/steadydns: the
# servers side by side and the constant work, then loading a million names.
bench: deps build
	$(BENCH)
	$(BENCH) load

# The fleet over NATS: constancy per push and each role's capacity.
bench-fleet: deps build
	$(BENCH) fleet

# The unit names the binary and the docs by the default prefix; another
# prefix is written into the installed copy.
install:
	$(GO) build -o $(BIN) ./cmd/steadydns
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/steadydns
	install -d $(DESTDIR)$(UNITDIR)
	sed -e 's|/usr/local/bin/|$(BINDIR)/|g' -e 's|/usr/local/share/doc/|$(PREFIX)/share/doc/|g' \
		deploy/steadydns.service > $(DESTDIR)$(UNITDIR)/steadydns.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/steadydns.service
	install -D -m 0644 deploy/steadydns.sysusers $(DESTDIR)$(SYSUSERSDIR)/steadydns.conf
	install -d $(DESTDIR)$(DOCDIR)/examples/quickstart $(DESTDIR)$(DOCDIR)/examples/fleet
	install -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/
	install -m 0644 examples/quickstart/steadydns.yaml examples/quickstart/*.zone $(DESTDIR)$(DOCDIR)/examples/quickstart/
	install -m 0644 examples/fleet/*.yaml examples/fleet/*.zone $(DESTDIR)$(DOCDIR)/examples/fleet/

clean:
	rm -rf bin
