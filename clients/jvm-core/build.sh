#!/usr/bin/env bash
# Builds jumpgate-jvm-core and installs it into the local Maven repository (~/.m2), where the Spark
# plugin and the Trino connector find it. Runs its unit tests (SKIP_TESTS=1 skips them).
# Idempotent: does nothing when the installed jar is newer than every source and the pom.
# Needs: Java 17+, Maven 3.8+ (Maven Central reachable).
set -euo pipefail
cd "$(dirname "$0")"
installed=${M2_REPO:-$HOME/.m2/repository}/io/jumpgate/jumpgate-jvm-core/0.1.0/jumpgate-jvm-core-0.1.0.jar
stamp=target/.installed  # Maven keeps a jar whose classes did not change, so its time says little
if [ -f "$installed" ] && [ -f "$stamp" ] && [ -z "$(find src pom.xml -newer "$stamp" -print -quit)" ]; then
  echo "jvm-core: up to date ($installed)"
  exit 0
fi
command -v mvn >/dev/null || { echo "jvm-core: Maven (mvn) is needed to build" >&2; exit 1; }
skip=()
[ "${SKIP_TESTS:-0}" = 1 ] && skip=(-DskipTests)
mvn -q -B "${skip[@]}" install
touch "$stamp"
echo "jvm-core: installed $installed"
