#!/usr/bin/env bash
# The main job on the built-in default: synthesize examples/demo end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/edgesynth demo "$@"
