"""lmgym: Gymnasium text environments for language-model agents.

``import lmgym`` registers every environment id, so ``gymnasium.make("lmgym/KeyDoor-v0")``
works. Layers import only downward:
envs <- models <- components <- agents <- training <- benchmarks <- cli (base modules `io`, `data`,
`rollouts` sit below all of them).
"""

__version__ = "0.1.0"

from lmgym import envs as envs  # noqa: E402  registers the ids

__all__ = ["__version__", "envs"]
