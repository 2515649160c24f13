#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the whole test suite: unit, codegen golden files,
# end-to-end against a real server, the contract's outside check, and ruff.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check jumpgate tests bench
.venv/bin/python -m pytest -q -p no:cacheprovider tests
echo "== outside contract check (../shared/conformance/contract_check.py)"
if [ -f ../shared/conformance/contract_check.py ]; then
  .venv/bin/python ../shared/conformance/contract_check.py --project .
else
  echo "../shared/conformance/contract_check.py not found beside the project; skipped"
fi
