#!/usr/bin/env bash
# The whole test suite (reference corpus included), on two workers. With no arguments (what CI
# runs) the release check (scripts/release_check.sh: the wheel installed with [all] in a fresh
# environment outside the repository) runs beside the tests; its lines are printed when the
# tests are done, then pytest's closing line again. Fails when either fails.
# With arguments (a tier, a file: `-m "not corpus"`), only pytest runs, with those arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check src tests benchmarks
workers=${EDGESYNTH_TEST_WORKERS:-2}
if [ "$#" -gt 0 ]; then
  exec .venv/bin/python -m pytest -q -n "$workers" "$@"
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
bash scripts/release_check.sh >"$logs/release" 2>&1 &
release=$!
status=0
.venv/bin/python -m pytest -q -n "$workers" 2>&1 | tee "$logs/pytest" || status=$?
wait "$release" || { status=1; echo "[release] the release check failed" >&2; }
cat "$logs/release"
tail -n 1 "$logs/pytest"  # pytest's closing line, last
exit "$status"
