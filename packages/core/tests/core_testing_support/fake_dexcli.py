"""A stand-in ``dexcli``: checks the ``dev`` command line, then serves the embedded engine.

It records its arguments and the zd config it was given next to itself, so a
test can see what ``AgentTestStack`` asked of ``dexcli dev --engine zd``.
"""

import json
import os
import sys
from pathlib import Path

from dex_local_engine.cli import main

arguments = sys.argv[1:]
assert arguments[:3] == ["dev", "--engine", "zd"], arguments
config = Path(arguments[arguments.index("-zd-config") + 1])
record = {
    "arguments": arguments,
    "zd_config": config.read_text(),
    "server_zd_binary": os.environ.get("DEX_SERVER_ZD_BINARY"),
}
Path(os.environ["FAKE_DEXCLI_RECORD"]).write_text(json.dumps(record))
port = arguments[arguments.index("--dex-port") + 1]
database = Path(arguments[arguments.index("--sqlite-db-filename") + 1])
sys.exit(main(["serve", "--address", f"127.0.0.1:{port}", "--database", str(database)]))
