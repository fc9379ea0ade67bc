#!/usr/bin/env bash
# The whole test suite (reference corpus included), on two workers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check src tests benchmarks
exec .venv/bin/python -m pytest -q -n "${EDGESYNTH_TEST_WORKERS:-2}" "$@"
