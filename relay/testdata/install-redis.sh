#!/bin/sh
# install-redis.sh installs Debian's redis-server for the Redis store tests
# (relay/redis_test.go, which start their own redis-server on loopback) when
# redis-server is missing. It needs root (or sudo) and the Debian package
# archive; the Makefile runs it before the tests. Nothing is started here:
# the package's own service is left alone (the tests run their own server
# on a free port with a temporary directory).
set -eu

if command -v redis-server >/dev/null 2>&1; then
	exit 0
fi

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO=sudo
	else
		echo "install-redis.sh: redis-server is missing; run as root: apt-get update && apt-get install -y redis-server" >&2
		exit 1
	fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
# Where the package starts its own service, it listens on 6379 as usual;
# the tests never use it.
$SUDO apt-get install -y --no-install-recommends redis-server
redis-server --version
