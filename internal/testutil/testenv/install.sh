#!/bin/sh
# install.sh installs a real peer the tests run against, from Debian's
# packages, when it is missing:
#
#   sh internal/testutil/testenv/install.sh chromium      the relay page test (interop/relay_page_test.go)
#   sh internal/testutil/testenv/install.sh redis-server  the Redis store tests (relay/redis_test.go)
#   sh internal/testutil/testenv/install.sh golang-1.19   the rest module's old-Go consumer test (internal/oldgo)
#   sh internal/testutil/testenv/install.sh tmux          forward in a real terminal (terminal_test.go)
#   sh internal/testutil/testenv/install.sh prometheus    a real Prometheus scrapes /metrics (internal/cli/metrics_test.go)
#   sh internal/testutil/testenv/install.sh umoci         the image is unpacked as a runtime would (internal/ociimage)
#
# It says what it installs and why before it runs apt-get, and needs root or
# sudo. Without them it stops with the command to run; `go test` then skips
# the tests that need the peer (they fail only under CI=true or
# HOOKLINE_REQUIRE_ALL=1, see internal/testutil/testenv). Nothing is started here:
# the tests run their own redis-server on a free port.
set -eu

case "${1:-}" in
chromium)
	why="the relay's page is tested in a real headless browser"
	pkg=chromium
	opts= # its recommended packages bring the fonts the page is drawn with
	if [ -n "${HOOKLINE_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1 ||
		command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then
		exit 0
	fi
	;;
redis-server)
	why="the relay's Redis store is tested against a real Redis"
	pkg=redis-server
	opts=--no-install-recommends
	if command -v redis-server >/dev/null 2>&1; then
		exit 0
	fi
	;;
golang-1.19)
	why="the rest module is built by the oldest Go Debian has, in a module that says go 1.14"
	pkg=golang-1.19
	opts=--no-install-recommends
	if [ -x /usr/lib/go-1.19/bin/go ] || [ -n "${HOOKLINE_OLD_GO:-}" ]; then
		exit 0
	fi
	;;
tmux)
	why="forward's trace and Ctrl-C are tested in a real terminal"
	pkg=tmux
	opts=--no-install-recommends
	if command -v tmux >/dev/null 2>&1; then
		exit 0
	fi
	;;
prometheus)
	why="serve's and forward's /metrics are scraped and queried by a real Prometheus (and checked by its promtool)"
	pkg=prometheus
	opts=--no-install-recommends
	if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
		exit 0
	fi
	;;
umoci)
	why="the container image is unpacked as a runtime would, then run from its filesystem"
	pkg=umoci
	opts=--no-install-recommends
	if command -v umoci >/dev/null 2>&1; then
		exit 0
	fi
	;;
*)
	echo "usage: sh internal/testutil/testenv/install.sh chromium|redis-server|golang-1.19|tmux|prometheus|umoci" >&2
	exit 2
	;;
esac

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		SUDO=sudo
	else
		echo "install.sh: $1 is missing and installing it needs root ($why)." >&2
		echo "  run as root: apt-get update && apt-get install -y $opts $pkg" >&2
		echo "  or go on without it: go test skips the tests that need it (outside CI)." >&2
		exit 1
	fi
fi

echo "install.sh: installing Debian's $pkg with apt-get: $why."
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y $opts "$pkg"
