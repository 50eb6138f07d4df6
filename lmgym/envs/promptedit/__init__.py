"""PromptEdit-JSON: steer a frozen generator toward valid, diverse JSON records by editing its prompt.

Modules, bottom up: `tasks` (schemas, semantic checks, real reference records), `metrics`
(the judge's numpy metrics and fallback embedder/LM), `judge` (statements, rubric, reward),
`edits` (the edit grammar and library), `generators` (the generator interface, entry-point
resolution and the seeded test generator), `env` (`PromptEditEnv`, `EditLibraryActions`).
"""

from lmgym.envs.promptedit.env import EditLibraryActions, PromptEditEnv

__all__ = ["EditLibraryActions", "PromptEditEnv"]
