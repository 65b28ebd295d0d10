#!/usr/bin/env bash
# librdkafka's own test suite (tests/, e.g. 0011-produce_batch.c and 0081-admin.c), built
# against the librdkafka of the same release, into <repo>/.cache/librdkafka/<version>/.
#
#   scripts/librdkafka/fetch-librdkafka-tests.sh
#
# The source comes from the npm registry: @confluentinc/kafka-javascript vendors librdkafka
# whole (deps/librdkafka, tests included), pinned here by version and sha256. Idempotent: returns
# at once when the build is complete. Build output goes to stderr; the last line of stdout is
# the absolute path of the tests directory (run `TESTS=0011 ./run-test.sh -Q -E` there, with a
# test.conf naming bootstrap.servers).
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

PACKAGE="@confluentinc/kafka-javascript"
PACKAGE_VERSION="1.10.1"   # vendors librdkafka 2.15.1
LIBRDKAFKA_VERSION="2.15.1"
SHA256="ada7d703bb1d3237e2292bfabf438d663b6160c9f1ac2a2406b5dc4257c81b66"
URL="https://registry.npmjs.org/${PACKAGE}/-/kafka-javascript-${PACKAGE_VERSION}.tgz"

BASE="$REPO_ROOT/.cache/librdkafka/$LIBRDKAFKA_VERSION"
TREE="$BASE/librdkafka"
MARKER="$BASE/.complete"
if [[ -f "$MARKER" ]]; then
  echo "$TREE/tests"
  exit 0
fi
for tool in curl make gcc g++ python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
mkdir -p "$BASE"
exec 9>"$BASE/.lock"
flock 9
if [[ -f "$MARKER" ]]; then echo "$TREE/tests"; exit 0; fi

WORK="$(mktemp -d "$BASE/work.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "librdkafka tests: fetching $PACKAGE@$PACKAGE_VERSION (librdkafka $LIBRDKAFKA_VERSION)" >&2
curl -fsSL --retry 3 -o "$WORK/pkg.tgz" "$URL"
echo "$SHA256  $WORK/pkg.tgz" | sha256sum -c --quiet - >&2
tar xzf "$WORK/pkg.tgz" -C "$WORK" package/deps/librdkafka
rm -rf "$TREE"
mv "$WORK/package/deps/librdkafka" "$TREE"

JOBS="$(nproc)"
cd "$TREE"
echo "librdkafka tests: building (about 5 CPU-minutes)" >&2
./configure --disable-ssl --disable-gssapi --disable-zstd --disable-curl >"$BASE/build.log" 2>&1 \
  || { tail -n 40 "$BASE/build.log" >&2; exit 1; }
make -j"$JOBS" libs >>"$BASE/build.log" 2>&1 || { tail -n 40 "$BASE/build.log" >&2; exit 1; }
make -j"$JOBS" -C tests test-runner >>"$BASE/build.log" 2>&1 || { tail -n 40 "$BASE/build.log" >&2; exit 1; }
touch "$MARKER"
echo "$TREE/tests"
