#!/usr/bin/env bash
# Resolve Apache Kafka (broker + tools + all runtime deps) from Maven Central
# into <repo>/.cache/kafka/<version>/libs/ using Maven.
#
#   scripts/kafka/fetch-kafka.sh [VERSION]      (default: $KAFKA_VERSION or 4.1.1)
#
# Idempotent: returns at once when the cache is complete. Maven output goes to
# stderr; the last line of stdout is the absolute libs dir path.
# Env: KAFKA_MVN_ARGS (extra mvn args, e.g. -o for offline).
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
VERSION="${1:-${KAFKA_VERSION:-4.1.1}}"
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "error: bad Kafka version '$VERSION'" >&2; exit 2; }

BASE="$REPO_ROOT/.cache/kafka/$VERSION"
LIBS="$BASE/libs"
MARKER="$LIBS/.complete"

if [[ -f "$MARKER" ]]; then
  echo "$LIBS"
  exit 0
fi

command -v mvn >/dev/null 2>&1 || { echo "error: mvn not found (apt-get install maven)" >&2; exit 1; }
mkdir -p "$BASE"

# Serialize concurrent fetches of the same version.
exec 9>"$BASE/.lock"
flock 9
if [[ -f "$MARKER" ]]; then echo "$LIBS"; exit 0; fi

WORK="$(mktemp -d "$BASE/work.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
STAGE="$WORK/libs"
MVNLOG="$WORK/mvn.log"

run_mvn() {
  # shellcheck disable=SC2086
  if ! mvn -B -q ${KAFKA_MVN_ARGS:-} -f "$WORK/pom.xml" "$@" >"$MVNLOG" 2>&1; then
    cat "$MVNLOG" >&2
    echo "error: mvn $* failed (is Kafka $VERSION on Maven Central?)" >&2
    exit 1
  fi
}

# kafka_2.13 = broker (kafka.Kafka), kafka.tools.StorageTool, kafka.tools.DumpLogSegments;
# kafka-tools = org.apache.kafka.tools.* (ProducerPerformance, ConsoleProducer, TopicCommand, ...).
cat >"$WORK/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ringlog.tooling</groupId>
  <artifactId>kafka-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-storage</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-server</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>$VERSION</version></dependency>
  </dependencies>
</project>
POM

echo "fetch-kafka: resolving Apache Kafka $VERSION from Maven Central ..." >&2
run_mvn dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$STAGE"

# Kafka 4.x ships log4j2 (log4j-api/core) but no SLF4J binding in its poms;
# add the one matching its slf4j-api major version and log4j version.
shopt -s nullglob
log4j_jars=("$STAGE"/log4j-api-*.jar)
slf4j_jars=("$STAGE"/slf4j-api-*.jar)
if (( ${#log4j_jars[@]} > 0 && ${#slf4j_jars[@]} > 0 )); then
  log4j_ver="$(basename "${log4j_jars[0]}" .jar)"; log4j_ver="${log4j_ver#log4j-api-}"
  slf4j_ver="$(basename "${slf4j_jars[0]}" .jar)"; slf4j_ver="${slf4j_ver#slf4j-api-}"
  if [[ "$slf4j_ver" == 1.* ]]; then binding=log4j-slf4j-impl; else binding=log4j-slf4j2-impl; fi
  echo "fetch-kafka: adding $binding $log4j_ver (slf4j-api $slf4j_ver)" >&2
  run_mvn dependency:copy -Dartifact="org.apache.logging.log4j:$binding:$log4j_ver" -DoutputDirectory="$STAGE"
else
  echo "warning: no log4j-api/slf4j-api among Kafka deps; logging may be unconfigured" >&2
fi

for jar in "kafka_2.13-$VERSION.jar" "kafka-tools-$VERSION.jar" "kafka-clients-$VERSION.jar" \
           "kafka-storage-$VERSION.jar" "kafka-server-$VERSION.jar"; do
  [[ -f "$STAGE/$jar" ]] || { echo "error: $jar missing after resolution" >&2; exit 1; }
done

ls "$STAGE" | sort >"$STAGE/.complete"
rm -rf "$LIBS"
mv "$STAGE" "$LIBS"
echo "fetch-kafka: $(grep -c . "$LIBS/.complete") jars in $LIBS" >&2
echo "$LIBS"
