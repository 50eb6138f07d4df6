"""Every lmgym environment id, registered with Gymnasium on ``import lmgym``.

Entry points are strings, so registering imports no family code: a data-backed env loads
its data only when made. `ENVS` also records what `lmgym list` prints and what the test
matrix needs to know (which data folder an id reads, which optional extra it needs), and the
splits a full evaluation sweeps. `FAMILY_PROMPTS` names where each family keeps its ReAct
prompt (`family_prompt` loads it), beside its env and its teacher.

Ids follow ``lmgym/<Family>[-<Variant>]-v<N>``; anything that changes results bumps N.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from lmgym.data import data_root
from lmgym.entrypoints import load_entry_point
from lmgym.react import DEFAULT_PROMPT, ReActPrompt


@dataclass(frozen=True)
class EnvEntry:
    id: str
    entry_point: str
    description: str
    max_episode_steps: int
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: Sub-folder of LMGYM_DATA the env reads (None: runs with no data at all).
    requires_data: str | None = None
    #: Import names of optional packages the env needs (checked by tests and `lmgym list`).
    requires_modules: tuple[str, ...] = ()
    #: Share of seeded episodes the env's own expert must win (the test matrix checks it);
    #: below 1.0 only where the env says why (e.g. WebShop's search can miss the product).
    expert_min_success: float = 1.0
    #: Kwargs `lmgym play` adds for a person (``--env-kwargs`` overrides them).
    play_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Values of the env's ``split`` argument that a full evaluation sweeps (the suite ``full``).
    eval_splits: tuple[str, ...] = ()


ENVS: dict[str, EnvEntry] = {}

#: Each family's ReAct prompt (`lmgym.react.ReActPrompt`) as ``"module:attr"``, imported on use;
#: a family without one is prompted with `lmgym.react.DEFAULT_PROMPT`.
FAMILY_PROMPTS: dict[str, str] = {
    "ALFWorld": "lmgym.envs.alfworld.prompt:PROMPT",
    "HotPotQA": "lmgym.envs.hotpotqa.prompt:PROMPT",
    "KeyDoor": "lmgym.envs.keydoor:PROMPT",
    "WebShop": "lmgym.envs.webshop.prompt:PROMPT",
}


def family_prompt(family: str) -> ReActPrompt:
    """The ReAct prompt of `family` (``family_of(env_id)``), the default one where it has none."""
    target = FAMILY_PROMPTS.get(family)
    return load_entry_point(target, what="family prompt") if target else DEFAULT_PROMPT


def unavailable_reason(entry: EnvEntry) -> str | None:
    """Why `entry` cannot run here (its LMGYM_DATA folder or an optional module is missing), else
    None. The one check the test kit, the benchmark suites and ``lmgym list`` share."""
    if entry.requires_data is not None:
        root = data_root()
        if root is None:
            return f"needs LMGYM_DATA/{entry.requires_data} (LMGYM_DATA is unset)"
        if not (root / entry.requires_data).is_dir():
            return f"needs {root / entry.requires_data} (missing)"
    missing = [m for m in entry.requires_modules if importlib.util.find_spec(m) is None]
    if missing:
        return f"needs the optional modules {', '.join(missing)} (not installed)"
    return None


def env_name(env_id: str) -> str:
    """``"lmgym/HotPotQA-Gen-Easy-v0"`` -> ``"HotPotQA-Gen-Easy"``: the id without namespace and version."""
    return env_id.split("/", 1)[-1].rsplit("-v", 1)[0]


def family_of(env_id: str) -> str:
    """``"lmgym/HotPotQA-Gen-Easy-v0"`` -> ``"HotPotQA"``: the family an id belongs to."""
    return env_name(env_id).split("-", 1)[0]


def register_env(entry: EnvEntry) -> None:
    ENVS[entry.id] = entry
    if entry.id not in gym.registry:
        gym.register(
            id=entry.id,
            entry_point=entry.entry_point,
            max_episode_steps=entry.max_episode_steps,
            kwargs=dict(entry.kwargs),
        )


def _register_all() -> None:
    # --- KeyDoor: the tiny procedural env that exercises the whole stack --------------
    register_env(EnvEntry(
        "lmgym/KeyDoor-v0", "lmgym.envs.keydoor:KeyDoorEnv",
        "Find a key in a few rooms and unlock the vault (procedural, learnable in seconds)",
        max_episode_steps=30,
    ))
    register_env(EnvEntry(
        "lmgym/KeyDoor-Large-v0", "lmgym.envs.keydoor:KeyDoorEnv",
        "KeyDoor on a 3x3 house with distractor items",
        max_episode_steps=60, kwargs={"size": 3, "num_distractors": 3},
    ))

    # --- WebShop: search, browse and buy on the official 1,000-product catalogue ----------
    # 15 steps: the ReAct paper's WebShop budget (ysymyth/ReAct WebShop.ipynb, webshop_run).
    # expert_min_success 0.8: the expert buys the goal product with the goal options, but the
    # original reward scores some exact options below 1 (96.0% success on test, docs/notes/webshop.md).
    register_env(EnvEntry(
        "lmgym/WebShop-v0", "lmgym.envs.webshop.env:WebShopEnv",
        "Search a 1,000-product shop and buy what an instruction asks (WebShop, test split)",
        max_episode_steps=15, requires_data="webshop",
        requires_modules=("bm25s", "Stemmer", "rapidfuzz", "spacy"), expert_min_success=0.8,
        play_kwargs={"observation_mode": "text_rich"},  # people read lines; agents keep the [SEP] view
        eval_splits=("test",),
    ))
    # WebShop over a procedural catalogue in the official layout (num_products up to 100,000;
    # no data needed). Same pages, search, goals, reward and expert as WebShop-v0.
    register_env(EnvEntry(
        "lmgym/WebShop-Gen-v0", "lmgym.envs.webshop.gen:WebShopGenEnv",
        "WebShop over a generated catalogue (procedural, 1,000 products by default, up to 100,000)",
        max_episode_steps=15, requires_modules=("bm25s", "Stemmer", "rapidfuzz", "spacy"),
        play_kwargs={"observation_mode": "text_rich"},
    ))

    # --- HotPotQA search: ReAct's search[]/lookup[]/finish[] over real paragraphs, offline ---
    # 7 steps: ReAct's HotPotQA evaluation loop (ysymyth/ReAct hotpotqa.ipynb, range(1, 8)).
    search_modules = ("bm25s", "Stemmer", "rapidfuzz")
    register_env(EnvEntry(
        "lmgym/HotPotQA-v0", "lmgym.envs.hotpotqa.env:HotPotQAEnv",
        "Answer a real HotPotQA question by searching its 10 paragraphs (distractor setting)",
        max_episode_steps=7, requires_data="hotpotqa", requires_modules=search_modules, eval_splits=("dev", "test"),
    ))
    register_env(EnvEntry(
        "lmgym/HotPotQA-AllPages-v0", "lmgym.envs.hotpotqa.env:HotPotQAEnv",
        "HotPotQA search over every paragraph of the 588 questions (5,716 pages)",
        max_episode_steps=7, kwargs={"corpus": "all"}, requires_data="hotpotqa", requires_modules=search_modules,
        eval_splits=("dev", "test"),
    ))
    for variant, difficulty in (("", "medium"), ("-Easy", "easy"), ("-Hard", "hard")):
        register_env(EnvEntry(
            f"lmgym/HotPotQA-Gen{variant}-v0", "lmgym.envs.hotpotqa.gen:HotPotQAGenEnv",
            f"HotPotQA search over a generated encyclopedia ({difficulty}: procedural, unlimited)",
            max_episode_steps=7, kwargs={"difficulty": difficulty}, requires_modules=search_modules,
        ))
    # --- single-answer reasoning (issue 19): the tasks of the multi-agent KV-team comparison ---
    # 3 steps: one answer and two malformed tries.
    for variant, steps in (("", 3), ("-Easy", 2), ("-Hard", 5)):
        register_env(EnvEntry(
            f"lmgym/Arith{variant}-v0", "lmgym.envs.arith:ArithEnv",
            f"Multi-step arithmetic word problems with exact answers ({steps} steps; procedural, unlimited)",
            max_episode_steps=3, kwargs={"num_steps": steps},
        ))
    register_env(EnvEntry(
        "lmgym/HotPotQA-Distractor-v0", "lmgym.envs.hotpotqa.reading:HotPotQADistractorEnv",
        "Answer a real HotPotQA question from its 10 paragraphs in one finish[] (official distractor setting)",
        max_episode_steps=3, requires_data="hotpotqa", eval_splits=("dev", "test"),
    ))
    register_env(EnvEntry(
        "lmgym/HotPotQA-Distractor-Gen-v0", "lmgym.envs.hotpotqa.reading:HotPotQADistractorGenEnv",
        "The distractor reading setting over a generated encyclopedia (procedural, unlimited)",
        max_episode_steps=3,
    ))
    # --- PromptEdit-JSON: edit a frozen generator's prompt (issue 7, lmgym/envs/promptedit) ---
    for variant, folder in (("MultiWOZ", "multiwoz"), ("SelfInstruct", "self_instruct"),
                            ("SuperNI", "super_natural_instructions"), ("TruthfulQA", "truthfulqa")):
        register_env(EnvEntry(
            f"lmgym/PromptEdit-{variant}-v0", "lmgym.envs.promptedit.env:PromptEditEnv",
            f"Edit a frozen generator's prompt until it writes valid, diverse {variant} JSON records",
            max_episode_steps=8, kwargs={"task": variant}, requires_data=folder,
        ))
    # --- ALFWorld: the official household text games on a native engine (issue 3) --------
    register_env(EnvEntry(
        "lmgym/ALFWorld-v0", "lmgym.envs.alfworld.env:ALFWorldEnv",
        "ALFWorld household tasks (official json_2.1.1 games; native engine identical to TextWorld's)",
        max_episode_steps=50, requires_data="alfworld", eval_splits=("valid_seen", "valid_unseen"),
    ))

    # --- ALFWorld-Gen: procedural households from the alfworld wheel's ALFRED rooms (no data) ----
    register_env(EnvEntry(
        "lmgym/ALFWorld-Gen-v0", "lmgym.envs.alfworld.gen.env:ALFWorldGenEnv",
        "ALFWorld on generated households (procedural, unlimited; ALFRED's rooms but the 4 held out)",
        max_episode_steps=50, requires_modules=("alfworld",),
    ))
    register_env(EnvEntry(
        "lmgym/ALFWorld-Gen-Unseen-v0", "lmgym.envs.alfworld.gen.env:ALFWorldGenEnv",
        "ALFWorld-Gen in the 4 held-out rooms of ALFWorld's valid_unseen (10, 219, 308, 424)",
        max_episode_steps=50, kwargs={"split": "valid_unseen"}, requires_modules=("alfworld",),
    ))


_register_all()
