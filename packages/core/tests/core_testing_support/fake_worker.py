"""A stand-in Worker child: it starts a grandchild in its process group, then says it is ready.

The grandchild's PID goes to ``FAKE_WORKER_GRANDCHILD_PID_FILE``, so a test can
check that ``WorkerProcess.kill()`` kills the whole group.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

from dex_agents.testing._worker_process import READY_FILE_ENV

if os.environ.get("FAKE_WORKER_FAIL"):
    sys.exit(f"fake worker refused to start: {os.environ['FAKE_WORKER_FAIL']}")
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
Path(os.environ["FAKE_WORKER_GRANDCHILD_PID_FILE"]).write_text(str(grandchild.pid))
Path(os.environ[READY_FILE_ENV]).touch()
while True:
    time.sleep(1)
