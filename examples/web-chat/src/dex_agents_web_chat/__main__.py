"""``python -m dex_agents_web_chat``: the same as ``dex-agents-web-chat``."""

import sys

from dex_agents_web_chat.cli import main

sys.exit(main())
