#!/usr/bin/env bash
# The CI of one workspace member (every member's ci.sh runs this with its own directory): the
# locked install of the workspace, then lint and types of the member, then its tests and the
# shared scenario suite under the scenario runners it registers.
#
# DEX_AGENTS_CI_TESTS_ALREADY_RUN=1 skips the tests: .ci/run sets it, because it has just run the
# whole suite (the README's test command), which already holds every member's tests.
set -euo pipefail
member_dir="$(cd "$1" && pwd)"
root="$(cd "$(dirname "$0")/.." && pwd)"
member="${member_dir#"$root"/}"
cd "$root"

step() { printf '%s ci: %s\n' "$member" "$*"; }

step "uv sync --locked --all-packages"
uv sync --locked --all-packages --quiet
step "ruff check, ruff format --check"
uv run --no-sync ruff check --quiet "$member"
uv run --no-sync ruff format --check --quiet "$member"
step "mypy --strict $member/src"
uv run --no-sync mypy "$member/src"

if [ "${DEX_AGENTS_CI_TESTS_ALREADY_RUN:-}" = 1 ]; then
    step "tests skipped: DEX_AGENTS_CI_TESTS_ALREADY_RUN=1 (the whole suite ran them)"
    exit 0
fi
step "pytest $member/tests"
uv run --no-sync pytest "$member/tests"
runners="$(PYTHONPATH=scripts uv run --no-sync python -m release_train scenario-runners "$member")"
if [ -n "$runners" ]; then
    step "the shared scenario suite under $runners"
    DEX_AGENTS_SCENARIO_RUNNERS="$runners" uv run --no-sync pytest tests-shared
fi
