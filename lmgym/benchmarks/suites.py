"""Built-in suites, built from the env registry so they never go stale.

* ``smoke``: KeyDoor ids with random and expert, a few episodes (seconds; the tests use it).
* ``default``: what ``make bench`` runs, in minutes on 2 cores: one or two representative ids per
  family (the family's first id and its first procedural ``-Gen`` variant) on held-out seeds
  0..N-1 (training data and few-shot demonstrations come from seeds >= 1,000,000), played by
  random everywhere, expert where the env gives ``info["expert_action"]``, the grounded
  teacher where the family has one, and language models as ReAct agents (`LM_AGENTS`): the
  family's tiny ReAct model from the zoo (``lm(model=tiny-ar)``) in every family that has one,
  and SmolLM2-135M-Instruct (``lm(model=smollm2)``, the default engine) in `SMOLLM2_FAMILIES`.
  Episodes per env: `DEFAULT_EPISODES`, fewer where an episode is costly (`EPISODES_BY_FAMILY`).
* ``full``: every data-backed id swept over its whole evaluation split, one episode per task
  (ALFWorld valid_seen and valid_unseen, WebShop test, HotPotQA dev and test); an id without a task
  list (PromptEdit) plays ``DEFAULT_EPISODES`` seeded episodes.

Ids whose ``requires_data`` folder is missing under ``LMGYM_DATA`` or whose ``requires_modules``
are not importable are left out, each with its reason in the summary's notes, and so is an LM
agent whose weights are not installed; nothing else is.
An env that raises when made or reset stays in the suite: its episodes are error rows in the
table and ``lmgym bench`` exits non-zero.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from lmgym.agents.lm import installed_family_model
from lmgym.agents.teacher import teacher_for
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec
from lmgym.entrypoints import load_entry_point
from lmgym.envs.registry import ENVS, family_of, unavailable_reason
from lmgym.models.zoo import ModelNotInstalled

SUITES = ("smoke", "default", "full")
SMOKE_EPISODES = 3
DEFAULT_EPISODES = 10
#: The default suite's episodes per env where an episode costs more: PromptEdit's 8 steps each
#: write and judge 16 records with the diffusion generator (30-80 s an episode on 2 busy cores).
EPISODES_BY_FAMILY = {"PromptEdit": 1}
#: The language models of the default suite, as ReAct agents (`lmgym.agents.lm`), each playing an
#: env's episodes in lockstep: the family's tiny model from the zoo (one torch thread: it shares
#: the cores), and SmolLM2-135M-Instruct with the family's demonstrations (the grounded teacher on
#: training seeds) as earlier chat turns, how it follows the format (docs/lm_agents.md).
LM_AGENTS = (AgentSpec("tiny-ar", "lm", {"model": "tiny-ar", "batch_size": 10, "backend_kwargs": {"threads": 1}}),
             AgentSpec("smollm2", "lm", {"model": "smollm2", "demonstration_turns": True, "batch_size": 10}))
#: Where SmolLM2 plays in the default suite: HotPotQA, whose episodes end in a few turns. On a
#: 2-core CPU a turn of it costs about a second (several under load), and it plays ALFWorld and
#: WebShop episodes to their step limits (15-50 turns): minutes per env, measured in
#: docs/benchmarks.md; `lmgym bench studies/specs/lm_agents.yaml` plays it everywhere.
SMOLLM2_FAMILIES = ("HotPotQA",)


def missing_requirement(env_id: str) -> str | None:
    """``"<id>: <why>"`` when `env_id` cannot run here (`unavailable_reason`), else None."""
    reason = unavailable_reason(ENVS[env_id])
    return f"{env_id}: {reason}" if reason else None


@dataclass(frozen=True)
class Probe:
    error: str | None  # what the env raised when made and reset, None when it started
    has_expert: bool = True  # unknown after an error: every agent plays (and reports the error)
    num_tasks: int | None = None


@functools.lru_cache(maxsize=None)
def _probe(env_id: str, kwargs_items: tuple[tuple[str, Any], ...]) -> Probe:
    try:
        env = gym.make(env_id, **dict(kwargs_items))
        try:
            _, info = env.reset(seed=0)
            return Probe(None, "expert_action" in info, getattr(env.unwrapped, "num_tasks", None))
        finally:
            env.close()
    except Exception as error:  # kept in the suite: its rows will carry the error
        return Probe(f"{env_id}: failed to start ({type(error).__name__}: {str(error).splitlines()[0][:160]})")


def probe(env_id: str, kwargs: dict[str, Any] | None = None) -> Probe:
    """Make and reset the env once: can it run, does it give expert actions, how many tasks."""
    return _probe(env_id, tuple(sorted((kwargs or {}).items())))


AGENTS = (AgentSpec("random"), AgentSpec("expert"))


def _env(env_id: str, found: Probe, **fields: Any) -> EnvSpec:
    """An env entry; the expert plays only where the env gives ``info["expert_action"]``."""
    return EnvSpec(env_id, agents=() if found.has_expert else ("random",), **fields)


def representative_ids() -> list[str]:
    """Per family in registration order: its first id and its first ``-Gen`` id."""
    chosen: dict[str, list[str]] = {}
    for env_id in ENVS:
        ids = chosen.setdefault(family_of(env_id), [])
        is_gen = "-Gen" in env_id
        if not ids or (is_gen and not any("-Gen" in i for i in ids)):
            ids.append(env_id)
    return [i for ids in chosen.values() for i in ids]


def usable_envs(env_ids: list[str], notes: list[str]) -> list[tuple[str, Probe]]:
    """The ids of `env_ids` whose data and modules are here, with their probes (an env that
    fails to start is among them); why the others are left out goes to `notes`."""
    usable = []
    for env_id in env_ids:
        reason = missing_requirement(env_id)
        if reason:
            notes.append(reason)
        else:
            usable.append((env_id, probe(env_id)))
    return usable


def smoke_suite() -> BenchmarkSpec:
    envs = tuple(EnvSpec(i) for i in ENVS if family_of(i) == "KeyDoor")
    return BenchmarkSpec("smoke", envs, AGENTS, episodes=SMOKE_EPISODES)


def has_teacher(env_id: str) -> bool:
    try:
        teacher_for(env_id)
    except ValueError:
        return False
    return True


def tiny_react_families(families: list[str]) -> list[str]:
    """Those of `families` whose tiny ReAct model (what ``lm(model=tiny-ar)`` loads) is in the zoo."""
    found = []
    for family in families:
        try:
            installed_family_model("tiny-ar", family)
        except ModelNotInstalled:
            continue
        found.append(family)
    return found


def smollm2_missing() -> str | None:
    """Why SmolLM2-135M-Instruct cannot play here (its weights are not installed), else None."""
    from lmgym.models.networks import smollm2_gguf_path  # torch: only when the default suite is built

    try:
        smollm2_gguf_path()
    except FileNotFoundError as error:
        return f"smollm2: left out, {error}"
    return None


def default_suite(episodes: int = DEFAULT_EPISODES) -> BenchmarkSpec:
    notes: list[str] = []
    usable = usable_envs(representative_ids(), notes)
    missing = smollm2_missing()
    agents = list(AGENTS) + [AgentSpec("teacher")] + [a for a in LM_AGENTS if a.name != "smollm2" or not missing]
    notes += [missing] if missing else []
    tiny = tiny_react_families(sorted({family_of(env_id) for env_id, _ in usable}))
    notes.append(f"LM agents elsewhere: tiny-ar plays only the families with a tiny ReAct model in the zoo "
                 f"({', '.join(tiny) or 'none here'}), smollm2 only {', '.join(SMOLLM2_FAMILIES)} (elsewhere it plays "
                 "to the step limit at seconds a turn: docs/benchmarks.md)")
    envs = []
    for env_id, found in usable:
        family = family_of(env_id)
        playing = ["random"] + (["expert"] if found.has_expert else []) + (["teacher"] if has_teacher(env_id) else [])
        playing += (["tiny-ar"] if family in tiny else []) + (["smollm2"] if family in SMOLLM2_FAMILIES and not missing else [])
        envs.append(EnvSpec(env_id, agents=tuple(playing), episodes=min(episodes, EPISODES_BY_FAMILY.get(family, episodes))))
    agents = [a for a in agents if any(a.name in e.agents for e in envs)]
    return BenchmarkSpec("default", tuple(envs), tuple(agents), episodes=episodes, notes=tuple(notes))


def _split_variants(env_id: str) -> list[dict[str, Any]]:
    """Kwargs selecting each evaluation split of `env_id` (``[{}]`` when it has no ``split``)."""
    splits = ENVS[env_id].eval_splits
    entry_point = gym.spec(env_id).entry_point
    if not splits or not isinstance(entry_point, str):
        return [{}]
    if "split" not in inspect.signature(load_entry_point(entry_point)).parameters:
        return [{}]
    return [{"split": split} for split in splits]


def full_suite() -> BenchmarkSpec:
    notes: list[str] = []
    envs = []
    for env_id, entry in ENVS.items():
        if not entry.requires_data or "-Gen" in env_id:
            continue
        reason = missing_requirement(env_id)
        if reason:
            notes.append(reason)
            continue
        for kwargs in _split_variants(env_id):
            found = probe(env_id, EnvSpec(env_id, kwargs).make_kwargs)  # what the runner will make
            if found.error or not found.num_tasks:  # nothing to sweep: seeded episodes (an error shows in them)
                envs.append(_env(env_id, found, kwargs=kwargs, episodes=DEFAULT_EPISODES))
            else:
                envs.append(_env(env_id, found, kwargs=kwargs, sweep=True, episodes=found.num_tasks))
    return BenchmarkSpec("full", tuple(envs), AGENTS, episodes=1, notes=tuple(notes))


def build_suite(name: str) -> BenchmarkSpec:
    builders = {"smoke": smoke_suite, "default": default_suite, "full": full_suite}
    if name not in builders:
        raise KeyError(f"unknown suite {name!r}; built-in suites: {', '.join(SUITES)}")
    return builders[name]()
