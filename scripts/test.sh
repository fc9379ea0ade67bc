#!/usr/bin/env bash
# The whole test suite (reference corpus included), on two workers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check src tests benchmarks
# --dist loadgroup: modules marked xdist_group (a model trained once) stay on one worker
exec .venv/bin/python -m pytest -q -n "${EDGESYNTH_TEST_WORKERS:-2}" --dist loadgroup "$@"
