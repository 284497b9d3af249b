"""Whether a process of a test still lives."""

import os
from pathlib import Path


def process_exists(pid: int) -> bool:
    """Whether ``pid`` runs: a killed grandchild is re-parented and may linger as a zombie until
    reaped, which counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split()[2] == "Z")
