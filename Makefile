# imgd: two commands.
#   make run LIST=links.txt   build imgd (release) and prefetch every URL of LIST into ./imgd-data/cache
#   make test                 run every test (what CI runs)
# Both install the Debian packages they need first, when missing.

SWIFT ?= swift
# Build and link: libcurl (OpenSSL flavour), libcrypto, libsystemd, SQLite, through pkg-config.
BUILD_PACKAGES := libcurl4-openssl-dev libssl-dev libsystemd-dev libsqlite3-dev pkg-config
# The tests also drive the curl and sqlite3 command-line tools.
TEST_PACKAGES := curl sqlite3
LIST ?=
CACHE ?= ./imgd-data/cache

.PHONY: run test build deps test-deps bench clean

define install_missing
	@missing=""; for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing:$$missing"; \
		SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
endef

deps:
	$(call install_missing,$(BUILD_PACKAGES))

test-deps: deps
	$(call install_missing,$(TEST_PACKAGES))

build: deps
	$(SWIFT) build -c release --product imgd

run: build
	@if [ -z "$(LIST)" ]; then echo "usage: make run LIST=links.txt [CACHE=dir]   (a link list: one http(s) URL a line)"; exit 2; fi
	$$($(SWIFT) build -c release --show-bin-path)/imgd prefetch --cache "$(CACHE)" $(LIST)

test: test-deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

bench: deps
	bench/prefetch-bench.sh

clean:
	rm -rf .build imgd-data
