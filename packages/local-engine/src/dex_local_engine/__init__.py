"""A local server that speaks the Dex wire protocol (dex-local-engine).

Run it with ``dex-local-engine serve --address 127.0.0.1:0 --database engine.db``, or embed it::

    server = await EngineServer.start(ServerConfig("127.0.0.1:0", Path("engine.db")))
    ...
    await server.stop()
"""

__version__ = "0.3.0"

from dex_local_engine.exceptions import DexLocalEngineError, EngineConfigurationError
from dex_local_engine.server import AddressInUseError, EngineServer, ServerConfig
from dex_local_engine.store import Durability, StoreError
from dex_local_engine.streams import StreamStoreBackend

__all__ = [
    "AddressInUseError",
    "DexLocalEngineError",
    "Durability",
    "EngineConfigurationError",
    "EngineServer",
    "ServerConfig",
    "StoreError",
    "StreamStoreBackend",
    "__version__",
]
