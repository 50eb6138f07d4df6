"""A benchmark spec: which envs, which agents, how many episodes, from which seed.

Episode ``k`` of every agent in every env uses seed ``base_seed + k``, so agents are compared
on the same tasks (paired). With ``sweep=True`` an env's episode ``k`` also passes
``options={"task_index": k}``, so a finite split (ALFWorld valid_seen, HotPotQA dev) is played
exactly once in its own order.

Evaluation plays held-out tasks: an lmgym env whose kwargs name no ``split`` is made with
``split="test"`` (`EnvSpec.make_kwargs`). Each env's panel (`lmgym.benchmarks.panels`: its
task ids and their hash) is computed once per spec and written into spec.json (`to_json`); an
entry ``{panel: NAME}`` plays a named panel (`lmgym panels` lists them). A cell whose agent
loads a checkpoint trained on a task of the env's panel is refused unless
``allow_contaminated: true`` (`BenchmarkSpec.contamination`).

A spec is plain data: it round-trips through a dict, JSON, YAML and TOML::

    id: my-bench
    episodes: 20
    base_seed: 0
    max_steps: 50            # optional: overrides each env's registered time limit
    envs:
      - id: lmgym/KeyDoor-v0
      - {id: lmgym/KeyDoor-v0, kwargs: {size: 3}, label: keydoor-3x3}
      - {panel: keydoor-dev-100}
    agents:
      - random
      - {name: trained, kind: ppo, kwargs: {path: runs/ppo/model.zip}}
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from lmgym.benchmarks.panels import EVAL_SPLIT, Panel, check_contamination, named_panel, panel_of
from lmgym.envs.registry import ENVS


@dataclass(frozen=True)
class EnvSpec:
    id: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: Play task k in episode k (finite task lists only).
    sweep: bool = False
    #: Name in tables; the id plus its kwargs when empty.
    label: str = ""
    #: Episodes in this env (the spec's `episodes` when None), e.g. a split's task count.
    episodes: int | None = None
    #: Names of the spec's agents that play this env (all when empty), e.g. no expert where
    #: the env gives no expert_action.
    agents: tuple[str, ...] = ()
    #: The named panel (`lmgym.benchmarks.panels.PANELS`) this entry was made from (`from_panel`).
    panel: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "agents", tuple(self.agents))  # YAML/JSON give lists

    @classmethod
    def from_panel(cls, panel: str, *, kwargs: dict[str, Any] | None = None, label: str = "",
                   agents: tuple[str, ...] = ()) -> "EnvSpec":
        """The entry that plays the named `panel` (its id, split, episodes and sweep; `kwargs`
        add env arguments, e.g. an observation mode)."""
        named = named_panel(panel)
        return cls(named.env_id, {**named.env_kwargs, **(kwargs or {})}, sweep=named.sweep, label=label or panel,
                   episodes=named.n, agents=agents, panel=panel)

    @property
    def make_kwargs(self) -> dict[str, Any]:
        """The kwargs the env is made with: `kwargs`, with ``split="test"`` for an lmgym id that
        names none (evaluation plays held-out tasks; ``split: all`` plays an id as it was before splits)."""
        if self.id in ENVS and "split" not in self.kwargs:
            return {"split": EVAL_SPLIT, **self.kwargs}
        return dict(self.kwargs)

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        if not self.kwargs:
            return self.id
        return f"{self.id}({', '.join(f'{k}={v}' for k, v in sorted(self.kwargs.items()))})"


@dataclass(frozen=True)
class AgentSpec:
    #: Name in tables and rows.
    name: str
    #: A registered agent name or "module:Class" (see `lmgym.agents.registry`); `name` if empty.
    kind: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return self.kind or self.name


@dataclass(frozen=True)
class BenchmarkSpec:
    id: str
    envs: tuple[EnvSpec, ...]
    agents: tuple[AgentSpec, ...]
    episodes: int
    base_seed: int = 0
    #: Per-episode step limit overriding the registered one (None keeps the registry's).
    max_steps: int | None = None
    #: Why registered envs were left out (missing data or modules); shown in the summary.
    notes: tuple[str, ...] = ()
    #: Run cells whose agent's checkpoint trained on a task of the env's panel (rows marked
    #: ``contaminated: true``) instead of refusing them.
    allow_contaminated: bool = False

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise ValueError(f"episodes must be >= 1, got {self.episodes}")
        for kind, names in (("env", [e.name for e in self.envs]), ("agent", [a.name for a in self.agents])):
            if len(set(names)) != len(names):
                raise ValueError(f"duplicate {kind} names in spec {self.id!r}: {names}")
        agent_names = {a.name for a in self.agents}
        for env in self.envs:
            unknown = set(env.agents) - agent_names
            if unknown:
                raise ValueError(f"env {env.name!r} names agents {sorted(unknown)} not in the spec")

    def seed(self, episode: int) -> int:
        return self.base_seed + episode

    def episodes_in(self, env: EnvSpec) -> int:
        return self.episodes if env.episodes is None else env.episodes

    def plays(self, env: EnvSpec, agent: AgentSpec) -> bool:
        return not env.agents or agent.name in env.agents

    @functools.cached_property
    def panels(self) -> dict[str, Panel | str]:
        """Each env's panel (by env name), or why it could not be computed: an env that fails to
        be made or reset keeps its place and its episodes report the error as rows do."""
        panels: dict[str, Panel | str] = {}
        for env in self.envs:
            n = self.episodes_in(env)
            seeds = [self.seed(k) for k in range(n)]
            try:
                panel = panel_of(env.id, env.make_kwargs, seeds, range(n) if env.sweep else None)
            except Exception as error:  # noqa: BLE001  recorded in spec.json; the rows carry it too
                panels[env.name] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
                continue
            if env.panel:  # the name only where the entry still plays that panel (no --episodes cut)
                named = named_panel(env.panel)
                same = (panel.env_id, panel.split, list(panel.seeds), panel.task_indices) == (
                    named.env_id, named.split, list(range(named.n)), tuple(range(named.n)) if named.sweep else None)
                panel = replace(panel, name=env.panel if same else "")
            panels[env.name] = panel
        return panels

    @functools.cached_property
    def contamination(self) -> dict[tuple[str, str], bool | None]:
        """(env name, agent name) -> True when the agent's checkpoint trained on a task of the
        env's panel, False when not, None when unknown; raises `lmgym.errors.InputError` (one line)
        on a contaminated cell unless `allow_contaminated`."""
        return check_contamination(self)

    def row_marks(self, env_name: str, agent_name: str) -> dict[str, Any]:
        """What every row and summary cell of (env, agent) records about its panel."""
        panel = self.panels[env_name]
        return {"panel": panel.hash if isinstance(panel, Panel) else None,
                "contaminated": self.contamination[env_name, agent_name]}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BenchmarkSpec":
        """A spec from plain data (a run folder's spec.json too: its ``written_by`` and ``panels``
        are ignored). An env entry ``{panel: NAME}`` plays a named panel (`EnvSpec.from_panel`)."""
        if not isinstance(data, dict):
            raise ValueError(f"a spec must be a mapping of keys (id, envs, agents, episodes, ...), got {type(data).__name__}")
        data = {k: v for k, v in data.items() if k not in ("written_by", "panels")}
        unknown = set(data) - {"id", "envs", "agents", "episodes", "base_seed", "max_steps", "notes",
                               "allow_contaminated"}
        if unknown:
            raise ValueError(f"unknown spec keys {sorted(unknown)}")
        missing = [k for k in ("envs", "agents", "episodes") if k not in data]
        if missing:
            raise ValueError(f"the spec lacks {missing}")
        try:
            envs = tuple(EnvSpec(id=e) if isinstance(e, str) else EnvSpec.from_panel(**e) if "panel" in e and "id" not in e
                         else EnvSpec(**e) for e in data["envs"])
            agents = tuple(AgentSpec(name=a) if isinstance(a, str) else AgentSpec(**a) for a in data["agents"])
        except TypeError as error:  # an unknown or missing field of an env or agent entry
            raise ValueError(f"bad env or agent entry in the spec: {error}") from None
        return cls(id=str(data.get("id", "bench")), envs=envs, agents=agents, episodes=int(data["episodes"]),
                   base_seed=int(data.get("base_seed", 0)), max_steps=data.get("max_steps"),
                   notes=tuple(data.get("notes", ())), allow_contaminated=bool(data.get("allow_contaminated", False)))

    def to_json(self) -> str:
        """What spec.json holds: the spec and, under ``panels``, each env's panel record (or
        ``{"error": ...}``), so a folder names the tasks its rows played."""
        panels = {name: p.record() if isinstance(p, Panel) else {"error": p} for name, p in self.panels.items()}
        return json.dumps({**self.to_dict(), "panels": panels}, indent=2, sort_keys=True)


def load_spec(path: str | Path) -> BenchmarkSpec:
    """Read a spec from a ``.yaml``/``.yml``, ``.toml`` or ``.json`` file."""
    import tomllib

    path = Path(path)
    text = path.read_text(encoding="utf-8")
    parsers = {".yaml": (yaml.safe_load, yaml.YAMLError), ".yml": (yaml.safe_load, yaml.YAMLError),
               ".toml": (tomllib.loads, tomllib.TOMLDecodeError), ".json": (json.loads, json.JSONDecodeError)}
    if path.suffix not in parsers:
        raise ValueError(f"spec file must end in .yaml, .yml, .toml or .json: {path}")
    parse, malformed = parsers[path.suffix]
    try:
        data = parse(text)
    except malformed as error:
        where = str(error).replace("\n", " ")
        raise ValueError(f"{path} is not valid {path.suffix[1:].upper()}: {' '.join(where.split())[:300]}") from None
    try:
        return BenchmarkSpec.from_dict(data)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


_CALL = re.compile(r"^(?P<name>[^()]+?)\s*(\((?P<args>.*)\))?$", re.S)


def parse_call(text: str) -> tuple[str, dict[str, Any]]:
    """``"ppo(path=runs/x/model.zip, deterministic=true)"`` -> ``("ppo", {...})``.

    Values are read as YAML scalars (``3`` -> int, ``true`` -> bool, ``[a, b]`` -> list), so
    the command line can give kwargs without JSON quoting. Commas inside brackets are kept.
    """
    match = _CALL.match(text.strip())
    if not match:
        raise ValueError(f"cannot parse {text!r}; expected NAME or NAME(key=value, ...)")
    args = (match.group("args") or "").strip()
    kwargs = yaml.safe_load("{" + re.sub(r"(\w+)\s*=\s*", r"\1: ", args) + "}") if args else {}
    return match.group("name").strip(), kwargs
