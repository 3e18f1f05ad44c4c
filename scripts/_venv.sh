# Shared by scripts/run and scripts/test: create .venv once and install the project into it.
# Usage: . scripts/_venv.sh EXTRAS   (EXTRAS: "" or "test")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install --quiet --disable-pip-version-check --upgrade pip
if [ -n "${1:-}" ]; then
  python -m pip install --quiet --disable-pip-version-check -e ".[$1]"
else
  python -m pip install --quiet --disable-pip-version-check -e .
fi
