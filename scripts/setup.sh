#!/usr/bin/env bash
# Installs clover-struct (editable) and what it needs on a fresh machine.
# CPU torch 2.13.0 is installed first when no torch is present: a bare `torch`
# requirement would otherwise pull a multi-GB CUDA build.
#   scripts/setup.sh          runtime only
#   scripts/setup.sh demo     plus the demo extra (matplotlib, for the figure)
#   scripts/setup.sh test     plus the test, serve and ray extras (pytest, hypothesis, transformers,
#                             outlines, openai, instructor; starlette, uvicorn; Ray Data, pandas)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}   # the Makefile exports the same PYTHON
# (PyPI's plain torch==2.13.0 is the CUDA build: the +cpu one comes from a wheel folder or index pip
# is set up with, else from PyTorch's CPU index)
"$PY" -c "import torch" 2>/dev/null || "$PY" -m pip install -q "torch==2.13.0+cpu" \
    || "$PY" -m pip install -q "torch==2.13.0+cpu" --index-url https://download.pytorch.org/whl/cpu
extra=""
case "${1:-}" in test) extra="[test,serve,ray]" ;; demo) extra="[demo]" ;; esac
"$PY" -m pip install -q -e ".${extra}"
