"""Support of the LiteLLM tests: a fake provider server and agents on it.

Importing this package keeps LiteLLM offline before anything imports it: it never fetches its
model cost map (or anything else) from the network. Import it before ``litellm``.
"""

import os

OFFLINE_ENVIRONMENT = {"LITELLM_OFFLINE_MODE": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
"""LiteLLM's switches for no network at import; also passed to Worker and demo children."""

for _name, _value in OFFLINE_ENVIRONMENT.items():
    os.environ.setdefault(_name, _value)
