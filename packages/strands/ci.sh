#!/usr/bin/env bash
# This member's CI, the same for every workspace member: scripts/package_ci.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../../scripts/package_ci.sh" "$here"
