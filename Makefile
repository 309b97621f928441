# imgd: three commands.
#   make run                  build imgd and imgctl (release) and run the daemon on ./imgd-data
#                             (spool/, cache/, state/, imgd.sock); LIST=links.txt drops a list in first
#   make test                 run every test (what CI runs)
#   make bench-compare REF=<commit>   the working tree against REF, interleaved A/B, new ÷ REF
#                             per figure (as root; COMPARE_ARGS=--quick: a few minutes; bench/README.md)
# All three install the Debian packages they need first, when missing.

SWIFT ?= swift
# Build and link: libcurl (OpenSSL flavour), libcrypto, libsystemd, SQLite, ISA-L (CRC-32), through pkg-config.
BUILD_PACKAGES := libcurl4-openssl-dev libssl-dev libsystemd-dev libsqlite3-dev libisal-dev pkg-config
# The tests also drive the curl and sqlite3 command-line tools, make their TLS certificates with
# openssl, run nginx as the shared tier (contrib/fleet/) as a child process of their own and as a
# resizer (its image_filter module) in front of the HTTP face, check the metrics with promtool
# (package prometheus), and the boot test runs a real systemd in a container (systemd-nspawn on a
# debootstrapped root).
TEST_PACKAGES := curl sqlite3 openssl nginx libnginx-mod-http-image-filter prometheus systemd-container debootstrap
LIST ?=

.PHONY: run test smoke build deps test-deps bench bench-abuse bench-scrape bench-http bench-window bench-deadline bench-courtesy bench-fleet bench-compare crash-loop clean fuzz test-tsan test-asan sanitizer-smoke boot-test

# Services a package brings (nginx) are not started by its install: a policy-rc.d that refuses
# every start (exit 101) is in place for the install, unless the machine has one of its own.
define install_missing
	@missing=""; for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing:$$missing"; \
		SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
		rc=""; if [ ! -e /usr/sbin/policy-rc.d ]; then rc=1; \
			printf '#!/bin/sh\n# make test: no service starts while it installs packages\nexit 101\n' | $$SUDO tee /usr/sbin/policy-rc.d >/dev/null \
			&& $$SUDO chmod 755 /usr/sbin/policy-rc.d; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; status=$$?; \
		if [ -n "$$rc" ]; then $$SUDO rm -f /usr/sbin/policy-rc.d; fi; \
		exit $$status; \
	fi
endef

deps:
	$(call install_missing,$(BUILD_PACKAGES))

test-deps: deps
	$(call install_missing,$(TEST_PACKAGES))

build: deps
	$(SWIFT) build -c release --product imgd
	$(SWIFT) build -c release --product imgctl

run: build
	@if [ -n "$(LIST)" ]; then mkdir -p imgd-data/spool && cp "$(LIST)" "imgd-data/spool/.$$(basename "$(LIST)").tmp" \
		&& mv "imgd-data/spool/.$$(basename "$(LIST)").tmp" "imgd-data/spool/$$(basename "$(LIST)")"; fi
	@echo "imgctl: $$($(SWIFT) build -c release --show-bin-path)/imgctl"
	exec $$($(SWIFT) build -c release --show-bin-path)/imgd

# Swift Testing starts every test at once by default; on 2 cores the ~370 of them then wait
# seconds for a thread, and the deadlines of event waits (a server seeing a request within 5 s)
# measure the crowd instead of imgd. 16 at a time keeps both cores busy and the run as short.
TEST_WIDTH ?= 16
# Suites whose assertions bound a time from both sides (a body at max-rate takes 4.5–6 s; a
# client pausing less than the slow-reader timeout is never dropped; an idle connection closes
# after its timeout) run after the rest, two tests at a time: beside 14 others on 2 cores, their
# upper bounds measured the neighbours' load. Nothing in them is loosened for it.
TIMED_SUITES := RateCapTests|ControlLimitTests|ControlBackpressureTests

# In CI (the CI variable set), make test also runs `make smoke` after the suite.
test: test-deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --skip '$(TIMED_SUITES)' --experimental-maximum-parallelization-width $(TEST_WIDTH)
	$(SWIFT) test --skip-build --filter '$(TIMED_SUITES)' --experimental-maximum-parallelization-width 2
	@if [ -n "$$CI" ]; then $(MAKE) --no-print-directory smoke; fi

# The short run of the long proofs that CI makes: every fuzz target for 20 s, the crash loop
# with 10 kills against the debug imgd the suite just built, and the sanitizer smoke (both
# crash loops as root: they mount a loop image and run nginx; skipped, saying so, otherwise,
# as the suite skips what needs root).
smoke: test-deps
	FUZZ_SECONDS=20 Tests/Fuzz/fuzz.sh
	@if [ "$$(id -u)" -ne 0 ]; then echo "smoke: crash loop and sanitizer smoke skipped: they need root (a loop mount, nginx)"; \
	else IMGD=$$($(SWIFT) build --show-bin-path)/imgd bench/crash-loop.sh --kills 10 \
	&& $(MAKE) --no-print-directory sanitizer-smoke && $(MAKE) --no-print-directory boot-test; fi

# make boot-test (as root): imgd-ready.service under a real systemd as PID 1 (systemd-nspawn
# booting a debootstrapped Debian 12 root, made once in /var/tmp/imgd-nspawn-rootfs, ~2 min):
# a unit ordered after it starts only once the hot set is cached. Reuses the suite's debug build.
boot-test: test-deps
	IMGD_SYSTEMD_BOOT_TESTS=1 $(SWIFT) test --skip-build --filter ReadyBootTests

# The long proofs (docs/development.md, "Proofs under faults"). Each has its own build folder.
# make fuzz: every fuzz target under libFuzzer + AddressSanitizer for FUZZ_SECONDS each
# (default 300); FUZZ_TARGETS picks some, FUZZ_JOBS runs several at once.
FUZZ_SECONDS ?= 300
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) Tests/Fuzz/fuzz.sh

# make test-tsan / test-asan: the whole suite under ThreadSanitizer / AddressSanitizer, the imgd
# and imgctl binaries the integration tests start included. Every report, the test runner's or
# a child's, goes to a file under the build folder; any report fails the target.
test-tsan: test-deps
	TIMED_SUITES='$(TIMED_SUITES)' Tests/Sanitizers/run-sanitized-tests.sh thread

test-asan: test-deps
	TIMED_SUITES='$(TIMED_SUITES)' Tests/Sanitizers/run-sanitized-tests.sh address

# make sanitizer-smoke: CI's short form of the two above (as root): imgd alone built with each
# sanitizer, then the crash loop (5 kills) against it; any report fails it.
sanitizer-smoke: test-deps
	Tests/Sanitizers/sanitized-crash-loop.sh thread --kills 5
	Tests/Sanitizers/sanitized-crash-loop.sh address --kills 5

bench: deps
	bench/prefetch-bench.sh

# Issue 15's abuse patterns at once against the release imgd (needs root: nginx, a loop mount);
# ABUSE_ARGS=--quick for a 10 s smoke. Peak RSS and the well-behaved requests answered go to
# bench/RESULTS.md.
ABUSE_ARGS ?=
bench-abuse: deps
	bench/abuse-load.sh $(ABUSE_ARGS)

# Issue 30's scrape check: lookups beside 1,000 metrics scrapes a second and a warming list,
# failing when one takes over 5 ms; figures to bench/RESULTS.md. SCRAPE_ARGS: see --help.
SCRAPE_ARGS ?=
bench-scrape: deps
	bench/scrape-bench.sh $(SCRAPE_ARGS)

# The HTTP face against its control socket and nginx serving the same files, keep-alive, with wrk
# (needs root: apt-get for wrk and nginx). HTTP_BENCH_ARGS=--quick for a smoke run.
bench-http: deps
	bench/http-bench.sh $(HTTP_BENCH_ARGS)

# Issue 31's calendar windows: from each window's opening or close to its `window` event, over
# WINDOW_ARGS (--windows N, default 10: about 35 s); figures to bench/RESULTS.md.
WINDOW_ARGS ?=
bench-window: deps
	bench/window-bench.sh $(WINDOW_ARGS)

# Issue 31's deadline lists: how close lists' eta is to the finish, and what the larger share of
# a list at risk does against a list without a deadline (DEADLINE_ARGS: --urls, --delay-ms,
# --parallel); figures to bench/RESULTS.md.
DEADLINE_ARGS ?=
bench-deadline: deps
	bench/deadline-bench.sh $(DEADLINE_ARGS)

# Issue 31's courtesy loop: a warm beside a CPU hog, courtesy off and on; the host's stall share,
# the hog's CPU and the warm time to bench/RESULTS.md (needs root: nginx, a loop mount).
COURTESY_ARGS ?=
bench-courtesy: deps
	bench/courtesy-bench.sh $(COURTESY_ARGS)

# Issue 31's fleet: 1, 4 and 8 daemons warming one list through the shipped nginx tier and
# without it, from an origin with a 20 ms delay; origin requests per URL and completion p50/p99
# to bench/RESULTS.md (needs root: nginx). FLEET_ARGS=--quick for a smoke run.
FLEET_ARGS ?=
bench-fleet: deps
	bench/fleet-bench.sh $(FLEET_ARGS)

# Issue 28's guard against going back (needs root: nginx, a loop mount): the working tree against
# REF (a commit), both built in release (REF once, cached by commit under bench/work/compare),
# prefetch, lookups and start-up run as interleaved A/B pairs; new ÷ REF per figure, pair by pair,
# printed and written to bench/RESULTS.md. COMPARE_ARGS=--quick for a run of a few minutes.
REF ?=
COMPARE_ARGS ?=
bench-compare: deps
	@if [ -z "$(REF)" ]; then echo "make bench-compare: name the commit to compare against, e.g. REF=HEAD~3"; exit 2; fi
	bench/compare.sh $(COMPARE_ARGS) $(REF)

# The crash loop (needs root: a loop mount, nginx): imgd killed with SIGKILL CRASH_KILLS times at
# random moments, then the end state checked (fsck, every file's SHA-256, every list's report,
# no success lost, no leftovers); exit status 1 on any violation. IMGD=path uses that binary
# (release or debug) instead of building .build/release/imgd. CI runs CRASH_KILLS=10.
CRASH_KILLS ?= 100
crash-loop: deps
	bench/crash-loop.sh --kills $(CRASH_KILLS)

clean:
	rm -rf .build imgd-data

# make install [PREFIX=/usr] [DESTDIR=/tmp/stage]: a release build of imgd and imgctl, installed
# with their systemd units, shell completions and man pages. PREFIX=/usr is what the unit's
# ExecStart= and ExecReload= name; under another prefix the installed unit is rewritten to point at $(BINDIR).
# SCRATCH is SwiftPM's build folder (--scratch-path). Nothing is enabled or started: after
# installing to the live system, run systemd-sysusers, systemd-tmpfiles --create imgd.conf and
# systemctl daemon-reload.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
BASHCOMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPLETIONDIR ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPLETIONDIR ?= $(PREFIX)/share/fish/vendor_completions.d
SCRATCH ?= .build
INSTALL ?= install
# The man pages' date: SOURCE_DATE_EPOCH when set (reproducible packages), else today.
MANDATE = $(if $(SOURCE_DATE_EPOCH),--date $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%F))

.PHONY: install

# Man pages come from swift-argument-parser's generate-manual plugin: it builds the package in
# release (already done by then), runs each tool's --experimental-dump-help, and writes
# $(SCRATCH)/plugins/GenerateManual/outputs/<target>/<tool>.1. Completions come from each
# binary's --generate-completion-script.
install: deps
	$(SWIFT) build -c release --scratch-path $(SCRATCH) --product imgd
	$(SWIFT) build -c release --scratch-path $(SCRATCH) --product imgctl
	$(SWIFT) package --scratch-path $(SCRATCH) plugin generate-manual $(MANDATE)
	set -e; bin=$$($(SWIFT) build -c release --scratch-path $(SCRATCH) --show-bin-path); \
	man=$(SCRATCH)/plugins/GenerateManual/outputs; \
	for tool in imgd imgctl; do \
		$(INSTALL) -Dm755 $$bin/$$tool $(DESTDIR)$(BINDIR)/$$tool; \
		$(INSTALL) -Dm644 $$man/$$tool/$$tool.1 $(DESTDIR)$(MANDIR)/man1/$$tool.1; \
		$(INSTALL) -d $(DESTDIR)$(BASHCOMPLETIONDIR) $(DESTDIR)$(ZSHCOMPLETIONDIR) $(DESTDIR)$(FISHCOMPLETIONDIR); \
		$$bin/$$tool --generate-completion-script bash > $(DESTDIR)$(BASHCOMPLETIONDIR)/$$tool; \
		$$bin/$$tool --generate-completion-script zsh > $(DESTDIR)$(ZSHCOMPLETIONDIR)/_$$tool; \
		$$bin/$$tool --generate-completion-script fish > $(DESTDIR)$(FISHCOMPLETIONDIR)/$$tool.fish; \
		chmod 644 $(DESTDIR)$(BASHCOMPLETIONDIR)/$$tool $(DESTDIR)$(ZSHCOMPLETIONDIR)/_$$tool $(DESTDIR)$(FISHCOMPLETIONDIR)/$$tool.fish; \
	done
	$(INSTALL) -d $(DESTDIR)$(SYSTEMDUNITDIR)
	for unit in imgd.service imgd.socket imgd-ready.service; do \
		sed 's|/usr/bin/img|$(BINDIR)/img|g' systemd/$$unit > $(DESTDIR)$(SYSTEMDUNITDIR)/$$unit; \
		chmod 644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$unit; \
	done
	$(INSTALL) -Dm644 systemd/imgd.sysusers $(DESTDIR)$(SYSUSERSDIR)/imgd.conf
	$(INSTALL) -Dm644 systemd/imgd.tmpfiles $(DESTDIR)$(TMPFILESDIR)/imgd.conf
