#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the whole test suite: unit, codegen golden files,
# end-to-end against a real server, the contract's outside check, and ruff.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check jumpgate tests bench
# The Spark client's suite (tests/spark) needs Java, Maven and pyspark and runs TPC-DS twice through
# Spark; it is run on its own: bash clients/spark/build.sh && .venv/bin/pytest tests/spark
.venv/bin/python -m pytest -q -p no:cacheprovider tests --ignore=tests/spark
echo "== outside contract check (../shared/conformance/contract_check.py)"
if [ -f ../shared/conformance/contract_check.py ]; then
  .venv/bin/python ../shared/conformance/contract_check.py --project .
else
  echo "../shared/conformance/contract_check.py not found beside the project; skipped"
fi
