"""The release train of the dex-agents workspace: one version line, built wheels checked alone.

Run from the repository root with ``scripts`` on the import path (the shell scripts do this):

- ``python -m release_train check``: ``uv build`` of every package under ``packages/`` into
  ``dist/``, the contents of each wheel and sdist, then each package installed alone from those
  wheels into a fresh venv with pip, its modules imported, ``dex-agents doctor`` and, for an
  adapter, its README example run against ``dex-local-engine`` (``scripts/release_check.sh``).
- ``python -m release_train members``: the workspace members, one directory a line.
- ``python -m release_train scenario-runners DIR``: the scenario runners a member registers.
- ``python -m release_train compatibility-table``: the root README's compatibility table.

Packages are discovered from the workspace (``[tool.uv.workspace]`` of the root
``pyproject.toml``), never listed: a member under ``packages/`` is published; other members (the
example apps under ``examples/``) are tested and linted but not built or released.
"""

from release_train._errors import ReleaseTrainError
from release_train._workspace import (
    REPOSITORY_ROOT,
    WorkspaceMember,
    published_packages,
    workspace_members,
)

__all__ = [
    "REPOSITORY_ROOT",
    "ReleaseTrainError",
    "WorkspaceMember",
    "published_packages",
    "workspace_members",
]
