# Shared by scripts/run and scripts/test: create .venv once and install the project into it when needed.
# Usage: . scripts/_venv.sh EXTRAS   (EXTRAS: "" or "test")
# The install is skipped when .venv already holds this pyproject.toml's install (with those extras): the
# package is installed editable, so source changes need no reinstall; a changed pyproject.toml (dependencies,
# entry points) does. TRAINPULSE_REINSTALL=1 forces one.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
fi
# shellcheck disable=SC1091
. .venv/bin/activate
_want="$(python -c 'import hashlib,sys; print(hashlib.sha256(open("pyproject.toml","rb").read()).hexdigest())')"
_installed() { [ "$(cat ".venv/.trainpulse-installed$1" 2>/dev/null)" = "$_want" ]; }
if [ -n "${1:-}" ]; then
  if [ "${TRAINPULSE_REINSTALL:-}" = 1 ] || ! _installed "-$1"; then
    python -m pip install --quiet --disable-pip-version-check -e ".[$1]"
    echo "$_want" > ".venv/.trainpulse-installed-$1"
    echo "$_want" > ".venv/.trainpulse-installed"
  fi
elif [ "${TRAINPULSE_REINSTALL:-}" = 1 ] || ! { _installed "" || _installed "-test"; }; then
  python -m pip install --quiet --disable-pip-version-check -e .
  echo "$_want" > ".venv/.trainpulse-installed"
fi
unset -f _installed
