"""Evaluation panels: which tasks a number was measured on, named and hashed.

A panel is an env id with its kwargs, the canonical split it draws from (`lmgym.envs.splits`),
the seeds of its episodes (and the task indices, when it sweeps a finite split), and the
ordered task ids those episodes play; its hash is `lmgym.envs.splits.panel_hash` of the ids.
Two panels with the same hash played the same tasks in the same order, whatever their names,
machines or code versions; a changed generator changes the hash.

`panel_of` computes a panel by resetting the env once per episode (what the runner calls for
every env of a spec, so spec.json and every row name their panel). `PANELS` are the named
panels `lmgym panels` lists: per procedural family a test panel of 200 and a dev panel of 100
tasks, and the real-data splits whole where ``LMGYM_DATA`` has them. A spec plays one with
``envs: [{panel: keydoor-test-200}]``.

Contamination: a checkpoint records the panels its training data came from (``train_panels`` in
its meta, `lmgym.models.checkpoints.TRAIN_PANELS`); `contamination` intersects their task ids
with an evaluation panel's, and the runner refuses a cell where they overlap unless the spec
says ``allow_contaminated`` (then its rows carry ``contaminated: true``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import gymnasium as gym

from lmgym.envs.registry import ENVS, family_of, unavailable_reason
from lmgym.envs.splits import panel_hash
from lmgym.errors import InputError

#: What evaluation plays when a spec names no split (every lmgym id accepts it).
EVAL_SPLIT = "test"


@dataclass(frozen=True)
class Panel:
    env_id: str
    env_kwargs: dict[str, Any]
    split: str  # canonical: train, dev, test or all (the env's `task_split`)
    seeds: tuple[int, ...]
    task_ids: tuple[str, ...]
    task_indices: tuple[int, ...] | None = None  # episode k plays task task_indices[k] (a sweep)
    name: str = ""

    @property
    def n(self) -> int:
        return len(self.task_ids)

    @property
    def hash(self) -> str:
        return panel_hash(self.task_ids)

    def record(self) -> dict[str, Any]:
        """The panel as plain data, without its task ids (what spec.json holds)."""
        return {"name": self.name, "env_id": self.env_id, "env_kwargs": self.env_kwargs, "split": self.split,
                "n": self.n, "seeds": list(self.seeds),
                "task_indices": None if self.task_indices is None else list(self.task_indices), "hash": self.hash}


def panel_of(env_id: str, env_kwargs: dict[str, Any], seeds: Sequence[int],
             task_indices: Sequence[int] | None = None, *, name: str = "") -> Panel:
    """The panel of episodes ``reset(seed=seeds[k], options={"task_index": task_indices[k]})``
    of ``gym.make(env_id, **env_kwargs)``: one reset per episode, nothing played."""
    if task_indices is not None and len(task_indices) != len(seeds):
        raise ValueError(f"{len(seeds)} seeds but {len(task_indices)} task indices")
    env = gym.make(env_id, **env_kwargs)
    try:
        unwrapped = env.unwrapped
        ids = tuple(unwrapped.task_id_for(seed, None if task_indices is None else {"task_index": task_indices[k]})
                    for k, seed in enumerate(seeds))
        split = unwrapped.task_split
    finally:
        env.close()
    return Panel(env_id, dict(env_kwargs), split, tuple(int(s) for s in seeds), ids,
                 None if task_indices is None else tuple(int(i) for i in task_indices), name)


# -- named panels ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PanelSpec:
    """How to build a named panel: episodes k = 0..n-1 with seed k, and task k when it sweeps."""

    name: str
    env_id: str
    split: str
    n: int
    sweep: bool = False
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return {**self.kwargs, "split": self.split}

    def build(self) -> Panel:
        return panel_of(self.env_id, self.env_kwargs, range(self.n), range(self.n) if self.sweep else None,
                        name=self.name)

    def unavailable(self) -> str | None:
        """Why this panel cannot be built here (its data or modules are missing), else None."""
        return unavailable_reason(ENVS[self.env_id])


def _named() -> dict[str, PanelSpec]:
    specs = []
    # Procedural twins: seeds 0..n-1 in the split (a seed names one task within a split).
    for prefix, env_id in (("keydoor", "lmgym/KeyDoor-v0"), ("arith", "lmgym/Arith-v0"),
                           ("hotpotqa-gen", "lmgym/HotPotQA-Gen-v0"), ("alfworld-gen", "lmgym/ALFWorld-Gen-v0")):
        specs += [PanelSpec(f"{prefix}-test-200", env_id, "test", 200), PanelSpec(f"{prefix}-dev-100", env_id, "dev", 100)]
    # WebShop-Gen's splits are finite goal lists: their first goals, each once.
    specs += [PanelSpec("webshop-gen-test-200", "lmgym/WebShop-Gen-v0", "test", 200, sweep=True),
              PanelSpec("webshop-gen-dev-100", "lmgym/WebShop-Gen-v0", "dev", 100, sweep=True)]
    # Real data: every task of the official evaluation splits, once each.
    specs += [PanelSpec("alfworld-test-134", "lmgym/ALFWorld-v0", "test", 134, sweep=True),
              PanelSpec("alfworld-dev-140", "lmgym/ALFWorld-v0", "dev", 140, sweep=True),
              PanelSpec("webshop-test-500", "lmgym/WebShop-v0", "test", 500, sweep=True),
              PanelSpec("webshop-dev-1000", "lmgym/WebShop-v0", "dev", 1000, sweep=True),
              PanelSpec("hotpotqa-test-100", "lmgym/HotPotQA-v0", "test", 100, sweep=True),
              PanelSpec("hotpotqa-dev-488", "lmgym/HotPotQA-v0", "dev", 488, sweep=True)]
    return {spec.name: spec for spec in specs}


PANELS: dict[str, PanelSpec] = _named()


def named_panel(name: str) -> PanelSpec:
    if name not in PANELS:
        raise InputError(f"unknown panel {name!r}; `lmgym panels` lists them: {', '.join(PANELS)}")
    return PANELS[name]


# -- contamination ---------------------------------------------------------------------------
def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _model_folder(text: str, env_id: str) -> Path:
    """The folder a model name or path stands for (a `FAMILY_MODELS` alias: the env family's)."""
    from lmgym.agents.lm import FAMILY_MODELS, installed_family_model
    from lmgym.models import zoo

    if text in FAMILY_MODELS:
        return installed_family_model(text, family_of(env_id))
    return zoo.resolve(text)


def agent_checkpoints(agent_kwargs: dict[str, Any], env_id: str) -> list[Path]:
    """The lmgym checkpoint folders an agent with `agent_kwargs` loads to play `env_id`: every
    string kwarg naming a folder or an installed zoo model that holds a checkpoint meta file, or
    a file with one beside it (a PPO run's ``model.zip``), and for an alias of
    `lmgym.agents.lm.FAMILY_MODELS` (``tiny-ar``, ``smollm2-sft``, ...) the model installed for the env's family."""
    from lmgym.models.zoo import ModelNotInstalled

    folders = []
    for text in _strings(agent_kwargs):
        try:
            folder = Path(_model_folder(text, env_id))
        except (ModelNotInstalled, OSError, ValueError):
            continue
        folder = folder.parent if folder.is_file() else folder
        if folder.is_dir():
            from lmgym.models.checkpoints import META_FILE  # torch: only where a model folder is named

            if (folder / META_FILE).is_file():
                folders.append(folder)
    return folders


def trained_task_ids(folder: Path) -> tuple[set[str], bool]:
    """The task ids a checkpoint's meta says it trained on, and whether they are all it trained
    on: False when it records no panels, or one whose tasks are unknown (text records, an
    init that records none)."""
    from lmgym.models.checkpoints import TRAIN_PANELS, read_meta

    panels = read_meta(folder).get(TRAIN_PANELS)
    if panels is None:
        return set(), False
    known = [panel["task_ids"] for panel in panels if panel.get("task_ids") is not None]
    return {task for ids in known for task in ids}, len(known) == len(panels)


def contamination(agent_kwargs: dict[str, Any], panel: Panel) -> tuple[bool | None, str]:
    """(verdict, why) for an agent evaluated on `panel`: True when a checkpoint it loads trained
    on one of the panel's tasks, False when none did (or it loads none), None when a checkpoint
    does not record all its training tasks and none recorded overlaps (unknown)."""
    verdict: bool | None = False
    wanted = set(panel.task_ids)
    for folder in agent_checkpoints(agent_kwargs, panel.env_id):
        seen, complete = trained_task_ids(folder)
        overlap = wanted & seen
        if overlap:
            return True, (f"its checkpoint {folder} trained on {len(overlap)} of the panel's {len(wanted)} tasks "
                          f"(panel {panel.hash[:12]})")
        if not complete:
            verdict = None  # unknown, unless another checkpoint it loads overlaps
    return verdict, ""


def refuse_contaminated(agent_kwargs: dict[str, Any], panel: Panel, who: str, where: str,
                        remedy: str = "evaluate it on another panel") -> bool | None:
    """`contamination`'s verdict for `who` (an agent or a study's row) evaluated on `panel`
    (named `where`); InputError, one line, when it is contaminated."""
    verdict, why = contamination(agent_kwargs, panel)
    if verdict:
        raise InputError(f"refusing to evaluate {who} on {where}: {why}; {remedy}")
    return verdict


def check_contamination(spec) -> dict[tuple[str, str], bool | None]:
    """The verdict of every (env, agent) cell of `spec` (a `BenchmarkSpec`); InputError, one
    line, on the first contaminated cell unless ``spec.allow_contaminated``."""
    verdicts = {}
    for env in spec.envs:
        panel = spec.panels[env.name]
        for agent in (a for a in spec.agents if spec.plays(env, a)):
            if not isinstance(panel, Panel):
                verdicts[env.name, agent.name] = None
                continue
            if spec.allow_contaminated:
                verdicts[env.name, agent.name] = contamination(agent.kwargs, panel)[0]
                continue
            verdicts[env.name, agent.name] = refuse_contaminated(
                agent.kwargs, panel, agent.name, env.name,
                "evaluate it on another panel, or pass --allow-contaminated (spec: allow_contaminated: true) to run "
                "it with its rows marked contaminated")
    return verdicts
