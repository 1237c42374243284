#!/bin/sh
# install-chromium.sh installs Debian's chromium for the relay page test
# (relay_page_test.go) when /usr/bin/chromium is missing. It needs root (or
# sudo) and the Debian package archive; the Makefile runs it before the
# interop tests.
set -eu

if [ -x /usr/bin/chromium ]; then
	exit 0
fi

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO=sudo
	else
		echo "install-chromium.sh: /usr/bin/chromium is missing; run as root: apt-get update && apt-get install -y chromium" >&2
		exit 1
	fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y chromium
/usr/bin/chromium --version 2>/dev/null
