#!/usr/bin/env bash
# Starts the freshly built server for the browser tests: its own port, a
# temporary SQLite database, known users and keys, and a mail sink.
set -euo pipefail
cd "$(dirname "$0")"
port="$1"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dakghar-e2e.XXXXXX")
# What ships is one file: the tests run a copy of the binary alone in an
# empty folder, started from another, so the pages' stylesheet, scripts and
# wasm can only come from inside it. `make test` names the debug binary its
# tests built (the site embedded as in a release), `make screenshots` the
# release one.
mkdir "$tmp/bin" "$tmp/run"
cp "${DAKGHAR_BIN:-../target/debug/dakghar}" "$tmp/bin/"
bin="$tmp/bin/dakghar"
export DAKGHAR_DATABASE_URL="sqlite://$tmp/e2e.db"
unset DATABASE_URL
"$bin" account create --name "E2E Account" >/dev/null
"$bin" user create --email e2e@dakghar.test --account "E2E Account" --password 'e2e password 123' >/dev/null
"$bin" user create --email admin@dakghar.test --account "E2E Account" --admin --password 'e2e admin password' >/dev/null
# The tests send events through the REST API with this key.
state="${TMPDIR:-/tmp}/dakghar-e2e-$port"
mkdir -p "$state"
"$bin" api-key create --account "E2E Account" >"$state/api-key"
# The platform's key, for onboarding and portal links.
"$bin" api-key create --platform >"$state/platform-key"
# One user per project for the password reset, which signs them out everywhere.
for project in hydrated no-js; do
  "$bin" user create --email "reset-$project@dakghar.test" --account "E2E Account" --password 'e2e reset password' >/dev/null
done
# Mail goes to a sink the tests read; the portal test frames Dakghar from
# a page on localhost, the next port up.
smtp_port=$((port + 2))
: >"$state/mail.jsonl"
# In the server's process group: stopping the tests stops both.
node smtp-sink.mjs "$smtp_port" "$state/mail.jsonl" &
# Seconds instead of minutes between retries, a resend budget small enough
# to reach in a test, and the test receivers' loopback let through the
# SSRF guard.
cd "$tmp/run"
exec "$bin" serve --listen "127.0.0.1:$port" \
  --retry-base-delay 1s --retry-max-delay 2s --resends-per-minute 4 \
  --allow-subnets 127.0.0.1/32 \
  --smtp-url "smtp://127.0.0.1:$smtp_port" \
  --embed-origins "http://localhost:$((port + 1))"
