#!/usr/bin/env bash
# Builds the Jumpgate plugin for Spark (clients/spark/target/jumpgate-spark-<version>.jar) against
# the jars of the pyspark wheel installed in the project's venv (pyspark==4.3.0, Scala 2.13).
# It bundles jumpgate-jvm-core (../jvm-core: what the JVM clients share), built and installed into
# ~/.m2 first by ../jvm-core/build.sh, so spark.jars still names one jar.
# Idempotent: does nothing when the jar is newer than every source and pom (its own and jvm-core's).
# Needs: Java 17+, Maven 3.8+ (Maven Central reachable), pyspark in ../../.venv (or PYSPARK_JARS=dir).
set -euo pipefail
cd "$(dirname "$0")"
bash ../jvm-core/build.sh
jar=target/jumpgate-spark-0.1.0.jar
if [ -f "$jar" ] && [ -z "$(find src pom.xml ../jvm-core/src/main ../jvm-core/pom.xml -newer "$jar" -print -quit)" ]; then
  echo "spark plugin: up to date ($jar)"
  exit 0
fi
py=${PYTHON:-../../.venv/bin/python}
jars=${PYSPARK_JARS:-$("$py" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')}
if [ ! -f "$jars/spark-sql_2.13-4.3.0.jar" ]; then
  echo "spark plugin: $jars has no spark-sql_2.13-4.3.0.jar; install pyspark==4.3.0 (pip install -e '.[spark]')" >&2
  exit 1
fi
command -v mvn >/dev/null || { echo "spark plugin: Maven (mvn) is needed to build" >&2; exit 1; }
mvn -q -B -Dspark.jars="$jars" package
echo "spark plugin: built $jar"
