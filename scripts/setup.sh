#!/usr/bin/env bash
# Create .venv and install edgesynth with everything its tests need (idempotent).
# torch is pinned to 2.13.0: that CPU build is the one available here.
# Prints a line per step; the first set-up downloads/installs about 1 GB and takes minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
# The chips' C compilers and qemu (Debian packages): `edgesynth build`, `pulp run --rv32` and
# their tests use them; the host's gcc builds the generated C in the gap8 and MAX7800x CPU-part
# proofs; the report's tests open its page in chromium (headless). Installed with apt-get when
# missing and this user may (a failing apt-get stops the set-up); otherwise the tests that need
# them fail with the apt-get line to run.
TOOLS="gcc arm-none-eabi-gcc riscv64-unknown-elf-gcc qemu-riscv32 chromium"
PACKAGES="gcc gcc-arm-none-eabi libnewlib-arm-none-eabi gcc-riscv64-unknown-elf \
picolibc-riscv64-unknown-elf qemu-user chromium"
missing=""
for tool in $TOOLS; do command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"; done
if [ -n "$missing" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[setup] installing the cross compilers, qemu and chromium ($PACKAGES) for:$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt_log=$(mktemp)
    apt_failed() {
      tail -n 20 "$apt_log" >&2
      echo "[setup] apt-get failed (above); the tests need$missing: fix apt-get and run" \
        "bash scripts/setup.sh again" >&2
      exit 1
    }
    echo "[setup] apt-get update (reading the package lists)" >&2
    apt-get update -q >"$apt_log" 2>&1 || apt_failed
    echo "[setup] apt-get install (about 1-2 minutes; one line per package set up)" >&2
    # apt's own "Setting up ..." lines as progress; the whole log only when it fails.
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $PACKAGES 2>&1 | tee "$apt_log" \
      | { grep -E --line-buffered '^Setting up ' | sed -u 's/^/[setup]   /' >&2 || true; } \
      || apt_failed
    rm -f "$apt_log"
    for tool in $missing; do
      command -v "$tool" >/dev/null 2>&1 || { echo "[setup] still not found: $tool" >&2; exit 1; }
    done
  else
    echo "[setup] not found:$missing; the tests that need them fail until you install them:" \
      "sudo apt-get install $PACKAGES" >&2
  fi
fi
# The lock (constraints.txt, written by scripts/lock.sh): every pip call here, build isolation
# included, installs exactly the versions the tests last ran with. EDGESYNTH_UNLOCKED=1 (used by
# `scripts/lock.sh --upgrade`) takes the newest versions pyproject.toml's ranges allow instead.
if [ -z "${EDGESYNTH_UNLOCKED:-}" ]; then
  export PIP_CONSTRAINT="$PWD/constraints.txt"
fi
stamp=.venv/.edgesynth-installed
want=$(cat pyproject.toml scripts/setup.sh constraints.txt | sha256sum | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0  # up to date: stay quiet, so `scripts/demo.sh` output is the demo's
fi
step() { echo "[setup $1/4] $2" >&2; }
pip_install() {
  # pip's own progress lines ("Collecting ...", "Installing ..."), without the download bars;
  # the pipeline fails (and set -e stops the script) when pip fails.
  .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off "$@" 2>&1 \
    | { grep -E --line-buffered '^ *(Collecting|Installing|Successfully|ERROR|error)' >&2 || true; }
}
start=$SECONDS
if [ ! -x .venv/bin/python ]; then
  step 1 "creating .venv with $PYTHON"
  "$PYTHON" -m venv .venv
else
  step 1 ".venv exists; updating it"
fi
step 2 "installing the locked pip"
pip_install --upgrade pip
step 3 "installing torch 2.13.0 (CPU build; the largest download, a few minutes the first time)"
pip_install "torch==2.13.0"
step 4 "installing edgesynth with its extras: -e .[dev,train,onnx,pulp,plot]"
pip_install -e ".[dev,train,onnx,pulp,plot]"
echo "$want" > "$stamp"
echo "[setup] done in $((SECONDS - start)) s; run commands as .venv/bin/edgesynth" \
  "(or \`source .venv/bin/activate\`, then edgesynth)" >&2
