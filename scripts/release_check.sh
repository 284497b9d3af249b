#!/usr/bin/env bash
# The release check: `uv build` of every package under packages/ into dist/, the contents of each
# wheel and sdist, then each package installed alone from those wheels into a fresh venv with pip,
# its modules imported, `dex-agents doctor`, and an adapter's README example run against
# dex-local-engine. Options: --only PACKAGE, --python PATH, --work-directory DIR (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
uv sync --locked --all-packages --quiet
PYTHONPATH=scripts exec uv run --no-sync python -m release_train check "$@"
