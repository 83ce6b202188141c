#!/usr/bin/env bash
# `make fuzz`, second half: schemathesis against the OpenAPI document of a
# running server, with a real account key, platform key and admin key,
# every check and phase on (examples, coverage, fuzzing, stateful). Any
# finding fails the run. Usage: api.sh BINARY
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
st="$here/../../.tools/venv/bin/st"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dakghar-fuzz.XXXXXX")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export DAKGHAR_DATABASE_URL="sqlite://$tmp/fuzz.db"
unset DATABASE_URL
"$bin" account create --name fuzz >/dev/null
DAKGHAR_API_KEY=$("$bin" api-key create --account fuzz)
DAKGHAR_PLATFORM_KEY=$("$bin" api-key create --platform)
DAKGHAR_ADMIN_KEY=$("$bin" api-key create --account fuzz --admin)
export DAKGHAR_API_KEY DAKGHAR_PLATFORM_KEY DAKGHAR_ADMIN_KEY
# Private targets allowed: endpoint URLs are then checked without DNS (a
# fuzzer's made-up hosts would each wait for a resolver that is not there).
"$bin" serve --listen "127.0.0.1:$port" --allow-private-targets \
  --ingest-rate-limit unlimited --retention off >"$tmp/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
run() {
  (cd "$tmp" && "$st" --config-file "$here/schemathesis.toml" run \
    "http://127.0.0.1:$port/api/openapi.json" --checks all --wait-for-schema 30 --no-color "$@")
}
# Deleting accounts goes on its own: with GET /accounts beside it, the
# fuzzer would find and delete the account whose key it uses.
run --exclude-operation-id accounts_delete
run --include-operation-id accounts_create --include-operation-id accounts_delete \
  --include-operation-id accounts_get_one
