# hookline: one command checks everything.
#
#   make check   no stray large file, gofmt, go vet, staticcheck, the rest module's Go 1.14
#                language check, the whole test suite with -race (interop included),
#                every fuzz target for a few seconds, and the short suite with Go alone
#   make test    the test suite only (installs the interop node packages and
#                Debian's chromium, redis-server and tmux for the tests that
#                run them first)
#   make go-alone  `go test -short` without the node packages and with only go
#                on PATH: every test whose peer is missing skips
#   make bench   the Go micro-benchmarks
#   make fuzz-short  every fuzz target for a few seconds (part of check)
#   make release-check
#                `goreleaser check` on .goreleaser.yaml and a snapshot
#                release: every target cross-compiled, every archive packed,
#                the version ldflags checked (CI runs it after check)
#
# Tools are installed by this Makefile itself, pinned, into $(BIN) and
# interop/node_modules, and chromium, redis-server and tmux from Debian's packages;
# nothing beyond
# Go, node/npm and gcc needs to be there first.
#
# What each step costs, cold and warm: docs/DEVELOPMENT.md.

GO              ?= go
STATICCHECK_VER := v0.8.2
# Pinned tools live outside the checkout, so a fresh clone (CI) reuses them;
# their names carry their versions.
BIN             ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/hookline-tools
STATICCHECK     := $(BIN)/staticcheck-$(STATICCHECK_VER)
# The newest GoReleaser v2 that builds with Go 1.26 from the module proxy
# (v2.17 needs a module the proxy does not serve, v2.18 needs Go 1.27).
GORELEASER_VER  := v2.16.0
GORELEASER      := $(BIN)/goreleaser-$(GORELEASER_VER)
MODULE          := github.com/hookline/hookline
NODE_MODULES    := interop/node_modules/.package-lock.json

.PHONY: large-files redis oldgo tmux prometheus umoci fuzz-short check test go-alone fmt-check vet staticcheck lang-check release-check bench interop-deps browser clean

check: large-files fmt-check vet staticcheck lang-check test fuzz-short go-alone

# Everything but the race detector is built as a release is, without cgo
# (.goreleaser.yaml): go vet, staticcheck, the binaries the tests run, the
# image and the Go-alone run then share one build of every package instead
# of compiling it once with cgo and once without. The race detector needs
# cgo: .ci/gotest turns it back on for the race run.
export CGO_ENABLED := 0
# Test and command binaries are linked without DWARF (-w): nothing here
# runs a debugger, stack traces and race reports come from the runtime's own
# tables, and a link takes a fifth less CPU (a hundred links in a run).
GOFLAGS += -ldflags=-w
# As a release is built (.goreleaser.yaml): urfave/cli without its Markdown
# and man page writers, which hookline does not use.
GOFLAGS += -tags=urfave_cli_no_docs
export GOFLAGS

# SOCKET_COUNT runs the packages whose tests open sockets that many times
# (.ci/gotest); CI sets 2, so that a new flake shows before it lands.
test: interop-deps browser redis oldgo tmux prometheus umoci
	for m in $(MODULES); do (cd $$m && SOCKET_COUNT=$(SOCKET_COUNT) $(CURDIR)/.ci/gotest) || exit 1; done

# `go test -short` as a contributor with Go alone runs it: the node packages
# out of the way (moved aside for the run, and back after it; a run cut
# short leaves them in interop/.node_modules.go-alone, which the next run
# puts back), a PATH that holds only go, and none of the variables that
# demand every peer. A test whose peer is missing must skip with one line
# saying how to install it; any failure fails the check. In place, so that
# it reuses the packages go vet compiled (the same build: no cgo); go vet
# has run every analyzer, so the run does not vet again.
GO_ALONE        := $(BIN)/go-alone
NODE_ASIDE      := interop/.node_modules.go-alone
go-alone:
	@mkdir -p $(GO_ALONE)/bin
	@ln -sf "$$($(GO) env GOROOT)/bin/go" $(GO_ALONE)/bin/go
	@if [ -d $(NODE_ASIDE) ] && [ ! -d interop/node_modules ]; then mv $(NODE_ASIDE) interop/node_modules; fi
	@if [ -d interop/node_modules ]; then mv interop/node_modules $(NODE_ASIDE); fi; \
	status=0; for m in $(MODULES); do \
		log=$(GO_ALONE)/$$(echo $$m | tr ./ _).log; \
		(cd $$m && env -i HOME="$$HOME" PATH=$(GO_ALONE)/bin TMPDIR=/tmp \
			GOCACHE="$$($(GO) env GOCACHE)" GOMODCACHE="$$($(GO) env GOMODCACHE)" GOPROXY="$$($(GO) env GOPROXY)" GOFLAGS="$(GOFLAGS)" \
			go test -short -vet=off -v ./... >$$log 2>&1) || status=1; \
		grep -e '^FAIL' -e '^--- FAIL' -e '^panic' $$log; \
		echo "go-alone ($$m): skipped for a missing peer:"; \
		sed -n 's/^ *[a-z_]*\.go:[0-9]*: skipped: /  /p' $$log | sort | uniq -c; \
		[ $$status = 0 ] || { echo "go-alone: go test -short failed with Go alone; the log: $$log"; break; }; \
	done; \
	if [ -d $(NODE_ASIDE) ]; then mv $(NODE_ASIDE) interop/node_modules; fi; \
	exit $$status

# No tracked file over 2 MiB unless .ci/large-files lists it (build outputs
# and binaries never belong in the repository).
large-files:
	.ci/large-files

fmt-check:
	@out="$$(gofmt -l $$(find . -name '*.go' -not -path '*/node_modules/*' -not -path './.bin/*'))"; \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting (run gofmt -w):"; echo "$$out"; exit 1; fi

# The repository holds two modules: hookline, and rest (its own module, so
# that code written for Go 1.14 can require it alone); vet, staticcheck and
# the tests run in both.
MODULES         := . rest
SOCKET_COUNT    ?= 1

vet:
	for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

staticcheck: $(STATICCHECK)
	for m in $(MODULES); do (cd $$m && $(STATICCHECK) ./...) || exit 1; done

$(STATICCHECK):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VER)
	mv $(BIN)/staticcheck $@

# The rest module keeps compiling for code written for Go 1.14-1.17: its
# go.mod says go 1.14, so the compiler refuses newer language features.
lang-check:
	cd rest && $(GO) build ./...

# The first install builds GoReleaser from source (minutes on a cold Go build
# cache, seconds after). GoReleaser validates .goreleaser.yaml, then a
# snapshot release cross-compiles every target and packs every archive into
# dist/ as a real release would; the host's binary must print the version
# the ldflags gave it: the snapshot's version_template, the CHANGELOG's
# newest release with "-next" (0.1.0-next).
release-check: $(GORELEASER)
	$(GORELEASER) check
	$(GORELEASER) release --snapshot --clean
	@bin="$$(find dist -path '*$(shell $(GO) env GOOS)_$(shell $(GO) env GOARCH)*' -name hookline -type f | head -n 1)"; \
	out="$$("$$bin" version)"; echo "$$bin version: $$out"; \
	want="hookline $$(sed -n 's/^  version_template: "\(.*\)"/\1/p' .goreleaser.yaml)"; \
	case "$$out" in "$$want"*) ;; *) echo "release-check: the snapshot binary does not print $$want"; exit 1;; esac
	# The container image, from the same static binary (internal/ociimage:
	# an OCI layout, no Docker daemon, no base image).
	@bin="$$(find dist -path '*linux_$(shell $(GO) env GOARCH)*' -name hookline -type f | head -n 1)"; \
	$(GO) run ./cmd/hookline-image -binary "$$bin" -out dist/image -version snapshot

$(GORELEASER):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VER)
	mv $(BIN)/goreleaser $@

interop-deps: $(NODE_MODULES)

# npm ci writes node_modules/.package-lock.json; reinstall when the lockfile
# is newer than the installed tree.
$(NODE_MODULES): interop/package-lock.json interop/package.json
	@command -v npm >/dev/null || { echo "npm is required for the interop suite (node 20+)"; exit 1; }
	npm ci --prefix interop
	# Of @octokit/openapi's descriptions (385 MB: GHES versions, dereferenced
	# copies) the tests read one, api.github.com.json (13 MB).
	find interop/node_modules/@octokit/openapi/generated -type f ! -name api.github.com.json -delete
	@touch $@

# The relay page is tested in a real headless Chromium (Debian's package,
# installed when missing; needs root or sudo).
browser:
	sh internal/testutil/testenv/install.sh chromium

# The Redis store tests start their own redis-server (Debian's package,
# installed when missing; needs root or sudo).
redis:
	sh internal/testutil/testenv/install.sh redis-server

# forward's trace and Ctrl-C are tested in a real terminal, tmux (Debian's
# package, installed when missing).
tmux:
	sh internal/testutil/testenv/install.sh tmux

prometheus:
	sh internal/testutil/testenv/install.sh prometheus

umoci:
	sh internal/testutil/testenv/install.sh umoci

# The rest module's old-Go test (internal/oldgo) builds and tests a consumer
# of rest with Debian's Go 1.19, the oldest Go this machine can install.
oldgo:
	sh internal/testutil/testenv/install.sh golang-1.19

# Every fuzz target for a few seconds (FUZZTIME=3s each); see .ci/fuzz for
# a long run of one target.
fuzz-short:
	.ci/fuzz

bench: redis
	for m in $(MODULES); do (cd $$m && $(GO) test -run '^$$' -bench . -benchmem -count 6 ./...) || exit 1; done

clean:
	rm -rf interop/node_modules
