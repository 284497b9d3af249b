"""The one error of the release train: a workspace or a build it cannot check."""

from __future__ import annotations

__all__ = ["ReleaseTrainError"]


class ReleaseTrainError(Exception):
    """The workspace, a ``pyproject.toml`` or a build is not what the release train can check.

    The message names the file or command and what to change.
    """
