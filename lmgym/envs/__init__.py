"""lmgym environments: the text-env contract, the families, shared wrappers.

Importing this package registers every id (see `lmgym.envs.registry`) without importing
any family's code. No torch here: envs are the bottom layer.
"""

from lmgym.envs.core import INFO_KEYS, TextEnv, TextSpace
from lmgym.envs.registry import ENVS, EnvEntry, register_env

__all__ = ["ENVS", "INFO_KEYS", "EnvEntry", "TextEnv", "TextSpace", "register_env"]
