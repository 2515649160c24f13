#!/usr/bin/env bash
# Builds the Jumpgate connector for Trino 476 into the plugin folder
#   clients/presto/target/jumpgate-trino-<version>/   (the connector jar and its runtime jars)
# to drop into Trino's plugin/ directory (docs/presto.md). Idempotent: does nothing when the
# folder's jar is newer than every source, the pom and the installed jvm-core jar. Packaging runs
# the connector's JUnit tests (src/test: request building, dynamic filter conditions).
# Needs: Maven 3.8+, a JDK 24+ (Trino 476's SPI is Java 24 bytecode; default
# /usr/lib/jvm/temurin-25-jdk-amd64, or JUMPGATE_TRINO_JAVA_HOME), and io.jumpgate:jumpgate-jvm-core
# (clients/jvm-core, installed into ~/.m2 by its own build.sh, which this runs first).
set -euo pipefail
cd "$(dirname "$0")"
version=0.1.0
dir=target/jumpgate-trino-$version
jar=$dir/jumpgate-trino-$version.jar
core=${HOME}/.m2/repository/io/jumpgate/jumpgate-jvm-core/0.1.0/jumpgate-jvm-core-0.1.0.jar
java_home=${JUMPGATE_TRINO_JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
if [ ! -x "$java_home/bin/java" ]; then
  echo "trino connector: no JDK 24+ at $java_home (set JUMPGATE_TRINO_JAVA_HOME)" >&2
  exit 1
fi
command -v mvn >/dev/null || { echo "trino connector: Maven (mvn) is needed to build" >&2; exit 1; }
# jvm-core first (its own build.sh: installs into ~/.m2, skips when up to date).
SKIP_TESTS=1 JAVA_HOME="$java_home" bash ../jvm-core/build.sh >/dev/null
if [ -f "$jar" ] && [ -z "$(find src pom.xml "$core" -newer "$jar" -print -quit)" ]; then
  echo "trino connector: up to date ($dir)"
  exit 0
fi
rm -rf "$dir"
JAVA_HOME="$java_home" mvn -q -B package
echo "trino connector: built $dir"
