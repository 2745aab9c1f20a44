#!/usr/bin/env bash
# The README's test command: install the package with its dev extras (and the plugin
# packages in plugins/), then run the whole test suite. Run from the repository root,
# inside a virtualenv.
set -euo pipefail
cd "$(dirname "$0")/.."
plugins=()
test_paths=(tests)
for plugin in plugins/*/; do
  [ -f "${plugin}pyproject.toml" ] || continue
  plugins+=(-e "$plugin")
  [ -d "${plugin}tests" ] && test_paths+=("${plugin}tests")
done
python -m pip install --quiet -e ".[dev]" "${plugins[@]}"
python -m pytest "${test_paths[@]}" "$@"
