#!/usr/bin/env bash
# The release check: what a user gets from `pip install edgesynth-*.whl[all]` works on its own.
#
# Builds the sdist and the wheel (python -m build), installs the wheel with [all] into a fresh
# virtual environment in a temporary folder outside the repository (no ../shared beside it),
# and runs there, from an empty folder with HOME inside it and no PYTHONPATH:
# `--version`, `demo --synthetic`, `compile` of a small ONNX model for every target, `run` of
# each, `device run` on the MAX78000 project, `pulp run`, a one-epoch `train` on the bundled
# digits, and `izer` on a corpus case copied into that folder. Any command that needs a file
# outside the installed package fails the check. pip's cache is used; constraints.txt at the
# repository root (the lock), if present, constrains every pip call (PIP_CONSTRAINT, the build's
# isolated environment included). A line per step; exit 1 on a failure.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
case_dir=$repo/../shared/corpus/cases/MAX78000/mnist
work=$(mktemp -d "${TMPDIR:-/tmp}/edgesynth-release.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS
step() { echo "[release $((SECONDS - start)) s] $*" >&2; }
fail() { echo "[release] FAILED: $*" >&2; exit 1; }
quiet() {  # run a command; show its output only when it fails
  local log=$work/step.log
  "$@" >"$log" 2>&1 || { tail -n 40 "$log" >&2; fail "$*"; }
}

[ -e "$work/../shared" ] && fail "$work/../shared exists: the check must run where there is none"
[ -d "$case_dir" ] || fail "the corpus case to copy is missing: $case_dir"

[ -f "$repo/constraints.txt" ] && export PIP_CONSTRAINT=$repo/constraints.txt
step "building the sdist and the wheel"
# from a copy of the files git knows (tracked, or new and not ignored), as a clone has them
source=$work/source
mkdir "$source"
git -C "$repo" ls-files -z -co --exclude-standard \
  | tar -C "$repo" --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$source" -xf -
quiet "$python" -m build --outdir "$work/dist" "$source"
wheel=$(ls "$work"/dist/edgesynth-*.whl)
ls "$work"/dist/edgesynth-*.tar.gz >/dev/null

step "installing $(basename "$wheel")[all] into a fresh virtual environment"
"$python" -c 'import sys; print(sys._base_executable)' >"$work/base"
"$(cat "$work/base")" -m venv "$work/venv"
quiet "$work/venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off \
  "$wheel[all]"

user=$work/user
mkdir -p "$user" "$work/home"
cp -r "$case_dir" "$user/mnist"
cp "$repo/scripts/release_models.py" "$work/release_models.py"
cd "$user"
# Only the installed copy: no PYTHONPATH, no recorder override, HOME inside the check.
unset PYTHONPATH EDGESYNTH_DEVTRACE PYTHONSTARTUP
export HOME=$work/home PATH=$work/venv/bin:$PATH
es() { step "edgesynth $*"; quiet edgesynth "$@"; }

installed=$(python -c 'import edgesynth, pathlib; print(pathlib.Path(edgesynth.__file__).parent)')
case $installed in
  "$work"/venv/*) ;;
  *) fail "edgesynth is imported from $installed, not from the fresh environment" ;;
esac
es --version
step "python -m edgesynth --version"
[ "$(python -m edgesynth --version)" = "$(edgesynth --version)" ] || fail "python -m edgesynth"
torch=$(python -c 'from importlib.metadata import version; print(version("torch"))')
[ "${torch%%+*}" = 2.13.0 ] || fail "torch $torch was installed, not 2.13.0"

es demo --synthetic --out demo
python "$work/release_models.py"
targets=$(edgesynth targets | awk '{print $1}')
case " $(echo $targets) " in
  *" gap8 "*" max78000 "*) ;;
  *) fail "edgesynth targets lists: $targets" ;;
esac
for target in $targets; do
  if [ "$target" = gap8 ]; then  # PULP/GAP8 takes integer networks
    es compile small_int.onnx -t "$target" -o "out-$target"
    es run "out-$target" -i inputs_int.npy -o "y-$target.npy"
  else
    es compile small.onnx -t "$target" -c calibration.npy -o "out-$target"
    es run "out-$target" -i inputs.npy -o "y-$target.npy"
  fi
done
es device run out-max78000/project
grep -q "known answer: all" "$work/step.log" || fail "device run: no known-answer match"
es pulp run out-gap8 --input inputs_int.npy --output pulp.npz
step "pulp run's generated C equals run's bit-exact model"
python - <<'EOF' || fail "pulp run differs from run"
import numpy as np
c = np.load("pulp.npz")
last = max((k for k in c.files if k.startswith("out_layer")), key=lambda k: int(k[9:]))
assert np.array_equal(c[last].ravel(), np.load("y-gap8.npy").ravel()), last
EOF
es train --dataset digits --epochs 1 --device cpu --deterministic --no-progress \
  --out-dir train --name one
(
  cd mnist
  mapfile -t args < <(python -c 'import json; print("\n".join(json.load(open("case.json"))["args"]))')
  es izer "${args[@]}" --test-dir out --prefix mnist
  es device run out/mnist
  grep -q "known answer: all" "$work/step.log" || fail "device run out/mnist: no known-answer match"
)
step "passed in $((SECONDS - start)) s"
