# Dakghar: `make run` serves the product, `make test` runs every test.
# Both install what is missing first (Rust targets and tools, wasm-opt,
# Chromium, npm packages); nothing is downloaded outside the package registries.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

TOOLS := $(CURDIR)/.tools
export PATH := $(TOOLS)/node_modules/.bin:$(HOME)/.cargo/bin:$(PATH)
# Leptos reads this at compile time: the same value for every cargo command
# keeps `cargo test`, clippy and the release build from rebuilding each other's crates.
export LEPTOS_OUTPUT_NAME := dakghar

# npm packages under .tools. A `--no-save` install there removes what it
# does not name, so the bench's install names these too.
BINARYEN = binaryen@132
ESBUILD = esbuild@0.28.2
FRONT_TOOLS = $(BINARYEN) $(ESBUILD)
# The bench's peer, bench/peers/graphile-worker/run.mjs, and its HTTP client.
GRAPHILE_WORKER_VERSION = 0.17.3
UNDICI_VERSION = 7.30.2

WASM_BINDGEN_VERSION = $(shell sed -n '/^name = "wasm-bindgen"$$/{n;s/^version = "\(.*\)"$$/\1/p;}' Cargo.lock)

.PHONY: run test build site tools lint fmt-check lint-wasm lint-site test-build test-rust e2e e2e-deps bench fuzz screenshots clean

# The first experience: a demo account with live traffic. `serve` is the
# same server without the demo data (see the README).
run: build
	./target/release/dakghar demo

# The release binary with the dashboard's files inside (build.rs embeds
# target/site): told the site's digest, it recompiles only when that changes.
build: site
	DAKGHAR_SITE_DIGEST=$(SITE_DIGEST) cargo build --release -p dakghar --bin dakghar

# The dashboard's browser half, built as cargo-leptos builds a release
# (which this replaces: installing it took 10 of a first run's minutes):
# the app crate to wasm, wasm-bindgen's glue, wasm-opt -Oz, the stylesheet
# and public/, minified. Built aside and swapped in whole; skipped when the
# wasm, the stylesheet and public/ are what the current site was made from.
SITE := target/site
# Brotli 11 and gzip 9 variants beside each text file and the wasm, for
# the server to send by Accept-Encoding. Node's zlib is native code; the
# same in build.rs (its fallback, for the files its `compressible` names,
# as the find below does) runs unoptimized there: 55 s a build.
export PRECOMPRESS = const fs = require("fs"), z = require("zlib"); \
  for (const f of process.argv.slice(1)) { const data = fs.readFileSync(f); \
    fs.writeFileSync(f + ".br", z.brotliCompressSync(data, { params: { [z.constants.BROTLI_PARAM_QUALITY]: 11 } })); \
    fs.writeFileSync(f + ".gz", z.gzipSync(data, { level: 9 })); }
SITE_DIGEST = $$(cd $(SITE) && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
WASM := target/wasm32-unknown-unknown/wasm-release/app.wasm
# The wasm half is linted as it is built, as the test build lints the
# server's: through clippy-driver, warning only, so `make run` still runs;
# `make test` refuses what it printed (lint-site). A fresh crate's warnings
# are printed again (cargo replays them), so a rerun refuses them too. The
# wrapper is not in cargo's fingerprint (neither here nor in test-build):
# a crate last compiled by a plain cargo command is linted again only when
# it changes; `make lint` always lints. The wasm differs from plain rustc's
# by 497 of 2 398 697 bytes (clippy-driver skips MIR optimizations).
SITE_LOG := target/site-build.log
site: tools
	@mkdir -p target
	$(CLIPPY_WARN) cargo build -p app --lib --target wasm32-unknown-unknown --profile wasm-release \
	  --no-default-features --features hydrate 2>&1 | tee $(SITE_LOG)
	@sources=$$(sha256sum $(WASM) style/main.css $$(find public -type f | sort) | sha256sum); \
	if [ -d $(SITE)/pkg ] && [ "$$sources" = "$$(cat $(SITE).sources 2>/dev/null)" ]; then exit 0; fi; \
	set -x; rm -rf $(SITE).next && mkdir -p $(SITE).next/pkg; \
	cp -R public/. $(SITE).next/; \
	wasm-bindgen --target web --no-typescript --out-name dakghar --out-dir $(SITE).next/pkg $(WASM); \
	wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int $(SITE).next/pkg/dakghar_bg.wasm -o $(SITE).next/pkg/dakghar.wasm; \
	rm $(SITE).next/pkg/dakghar_bg.wasm; \
	esbuild --minify --format=esm --log-level=warning --allow-overwrite $(SITE).next/pkg/dakghar.js --outfile=$(SITE).next/pkg/dakghar.js; \
	esbuild --minify --log-level=warning style/main.css --outfile=$(SITE).next/pkg/dakghar.css; \
	node -e "$$PRECOMPRESS" $$(find $(SITE).next -type f -regex '.*\.\(js\|wasm\|css\|svg\|html\|json\|txt\)'); \
	rm -rf $(SITE) && mv $(SITE).next $(SITE) && echo "$$sources" > $(SITE).sources

# Steps that do not need each other run side by side: alone, each leaves
# much of the two cores idle (wasm-opt and the wasm link run on one; the
# Rust tests and the browser tests wait on sockets, timers and Chromium).
# Each step's output is printed whole when it ends. clippy lints the
# crates as they are built, the wasm half in `site` and the server's as the
# tests build them (test-build): a `cargo clippy` of its own type-checks
# every dependency once more (the wasm half's took 4 of a first run's
# minutes beside the site's build). `make lint` is the same check without
# the tests.
SIDE_BY_SIDE = $(MAKE) --jobs=3 --output-sync=recurse
test:
	$(SIDE_BY_SIDE) tools e2e-deps
	$(SIDE_BY_SIDE) fmt-check site
	$(MAKE) lint-site test-build
	$(SIDE_BY_SIDE) test-rust e2e

lint: fmt-check lint-wasm
	cargo clippy -p dakghar --all-targets -- -D warnings

# The warnings `site` printed for the app crate (cargo sums them up in a
# line naming the crate), as `-D warnings` would refuse them.
lint-site: site
	@if grep -q '^warning: `app` (lib) generated' $(SITE_LOG); then \
	  echo "the app crate's wasm build has warnings (above, and in $(SITE_LOG))"; exit 1; fi

fmt-check:
	cargo fmt --all --check

lint-wasm:
	cargo clippy -p app --lib --features hydrate --target wasm32-unknown-unknown -- -D warnings

# clippy-driver as cargo's workspace wrapper, as `cargo clippy` runs it, but
# on a real build: each workspace crate is linted (-D warnings) and compiled
# in one pass, and the dependencies are built once, for the tests.
CLIPPY_WARN = RUSTC_WORKSPACE_WRAPPER="$$(rustc --print sysroot)/bin/clippy-driver"
CLIPPY_BUILD = $(CLIPPY_WARN) CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

# The tests' build: every test target, and the debug binary the browser
# tests run, with the site inside it as a release binary has it (an
# optimized build of its own would compile every dependency once more,
# a third of a first run). --bench builds (and so lints) the bench too;
# --tests, unlike --all-targets, leaves out the targets marked `test =
# false` in Cargo.toml. The run is the tests. The Postgres half runs when
# TEST_DATABASE_URL is set (CI always sets it). Beside other steps (make
# test), make hands cargo a jobserver whose descriptors it does not keep
# open for it; without MAKEFLAGS, cargo uses its own instead of warning
# about each.
TEST_CARGO = MAKEFLAGS= MFLAGS= DAKGHAR_SITE_DIGEST=$(SITE_DIGEST) $(CLIPPY_BUILD) \
  cargo test -p dakghar -p app --features app/ssr
test-build: site
	$(TEST_CARGO) --tests --bench dakghar --no-run

test-rust: test-build
	$(TEST_CARGO)

e2e: test-build e2e-deps
	cd end2end && DAKGHAR_BIN=../target/debug/dakghar npx playwright test

# The README's pictures (docs/*.png), from a fresh server; not part of `make test`.
screenshots: build e2e-deps
	cd end2end && DAKGHAR_BIN=../target/release/dakghar npx playwright test --config screenshots.config.ts

# A benchmark, never part of `make test`: SQLite, plus Postgres when
# BENCH_DATABASE_URL or TEST_DATABASE_URL names one. BENCH_SIZE=full
# burns down 100 k events × 10 endpoints instead of × 1. On Postgres,
# graphile-worker runs the same burn-down as a peer (bench/peers/).
bench:
	@grep -qs '"version": "$(GRAPHILE_WORKER_VERSION)"' $(TOOLS)/node_modules/graphile-worker/package.json \
	  && grep -qs '"version": "$(UNDICI_VERSION)"' $(TOOLS)/node_modules/undici/package.json \
	  || npm install --prefix $(TOOLS) --no-save --no-audit --no-fund \
	       $(FRONT_TOOLS) graphile-worker@$(GRAPHILE_WORKER_VERSION) undici@$(UNDICI_VERSION)
	cargo bench --bench dakghar

# The property tests of the parsers that take outside input (Retry-After,
# endpoint URLs, the ingest body), with far more cases than `make test` runs;
# then schemathesis (PyPI, in .tools/venv) against the API's own OpenAPI
# document on a running server (tests/fuzz/api.sh).
FUZZ_CASES ?= 200000
SCHEMATHESIS_VERSION = 4.32.5
fuzz:
	PROPTEST_CASES=$(FUZZ_CASES) cargo test -p dakghar --lib --release fuzz_
	@$(TOOLS)/venv/bin/st --version 2>/dev/null | grep -q ' $(SCHEMATHESIS_VERSION)$$' \
	  || (python3 -m venv $(TOOLS)/venv && $(TOOLS)/venv/bin/pip install --quiet schemathesis==$(SCHEMATHESIS_VERSION))
	cargo build -p dakghar --bin dakghar
	tests/fuzz/api.sh target/debug/dakghar

# wasm-bindgen-cli unoptimized, and only the binary we run: it compiles in
# 1 minute instead of 2 1/2 (its release profile asks for fat LTO) and then
# takes 2.4 s instead of 0.5 s over our wasm, with byte-identical output.
TOOL_BUILD = CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_LTO=false \
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256

tools:
	@rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
	@# wasm-bindgen-cli must match Cargo.lock exactly; its own lockfile names a crate
	@# version the registry lacks, hence no --locked.
	@wasm-bindgen --version 2>/dev/null | grep -q ' $(WASM_BINDGEN_VERSION)$$' || $(TOOL_BUILD) cargo install wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION) --bin wasm-bindgen
	@# wasm-opt from npm's binaryen: Debian's (v108) breaks hydration.
	@test -x $(TOOLS)/node_modules/.bin/wasm-opt && test -x $(TOOLS)/node_modules/.bin/esbuild \
	  || npm install --prefix $(TOOLS) --no-save --no-audit --no-fund $(FRONT_TOOLS)

e2e-deps:
	@command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)
	@test -d end2end/node_modules/@playwright/test || (cd end2end && npm ci --no-audit --no-fund)

clean:
	cargo clean
	rm -rf end2end/test-results end2end/node_modules $(TOOLS)
