#!/usr/bin/env bash
# Record the exact versions the tests run with into constraints.txt (the lock).
# scripts/setup.sh installs with these constraints (PIP_CONSTRAINT, build isolation included), so
# a fresh clone on a new machine, today or later, gets what the last CI ran with. Users of
# `pip install edgesynth` keep the ranges in pyproject.toml.
# Re-lock after changing a dependency: bash scripts/lock.sh --upgrade (takes the newest versions
# the ranges allow), then run the tests and commit constraints.txt with the change.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--upgrade" ]; then
  rm -f .venv/.edgesynth-installed
  EDGESYNTH_UNLOCKED=1 bash scripts/setup.sh
fi
.venv/bin/python -m pip install -q --disable-pip-version-check setuptools wheel
{
  echo "# The lock: every version the test suite ran with (scripts/lock.sh writes this file)."
  echo "# Python $(.venv/bin/python -c 'import platform; print(platform.python_version())')," \
    "$(uname -m) Linux. Used as pip constraints by scripts/setup.sh."
  .venv/bin/python -m pip freeze --all --exclude-editable | sed -E 's/\+cpu$//' | LC_ALL=C sort -f
} > constraints.txt
echo "[lock] wrote constraints.txt ($(grep -c '==' constraints.txt) packages)" >&2
