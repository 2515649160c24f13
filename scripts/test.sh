#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the whole test suite: unit, codegen golden files,
# end-to-end against a real server, the contract's outside check, ruff, and the Spark client's suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check jumpgate tests bench
.venv/bin/python -m pytest -q -p no:cacheprovider tests --ignore=tests/spark
echo "== outside contract check (../shared/conformance/contract_check.py)"
if [ -f ../shared/conformance/contract_check.py ]; then
  .venv/bin/python ../shared/conformance/contract_check.py --project .
else
  echo "../shared/conformance/contract_check.py not found beside the project; skipped"
fi
# The Spark client's suite (setup.sh installed Java, Maven and pyspark and built the plugin): a real
# server and a local Spark, the 99 TPC-DS queries off and on (about 15 minutes on 2 cores). Its own
# pytest run, so one JVM and one server serve all of it.
echo "== Spark client (tests/spark)"
.venv/bin/python -m pytest -q -p no:cacheprovider tests/spark
# The Trino (Presto) client's suite (setup.sh installed Trino 476 and built the connector): a real
# Trino server and a real Jumpgate server, the 22 TPC-H queries in three formats (2 to 5 minutes on
# 2 cores). Its own pytest run: a run over all of tests/ leaves tests/presto out.
echo "== Trino client (tests/presto)"
.venv/bin/python -m pytest -q -p no:cacheprovider tests/presto
