#!/usr/bin/env bash
# The main job on the built-in default end to end (edgesynth demo).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/edgesynth demo "$@"
