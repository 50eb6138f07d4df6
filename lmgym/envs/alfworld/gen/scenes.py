"""The ALFRED scene facts a household generator needs, read from the installed alfworld wheel.

The alfworld wheel (MIT) ships what ALFRED's own generator used:

* ``alfworld/gen/layouts/FloorPlan<N>-openable.json``: every static receptacle of the room with
  its real THOR object id (``"Cabinet|+00.68|+00.50|-02.20"``) and the agent pose that reaches
  it (x, z in metres, rotation in degrees, camera horizon in degrees);
* ``FloorPlan<N>-objects.json``: the object classes present in the room;
* ``FloorPlan<N>-layout.npy``: the reachable floor points (x, z in metres, 0.25 m grid);
* ``alfworld/gen/constants.py``: which object classes fit in which receptacle classes
  (``VAL_RECEPTACLE_OBJECTS``), which can be heated, cooled, cleaned, toggled
  (``VAL_ACTION_OBJECTS``), which receptacles open (``OPENABLE_CLASS_LIST``), room kinds
  (``SCENE_TYPE``) and the task types each room kind allows (``GOALS_VALID``);
* ``alfworld/gen/goal_library.py``: the PDDL goal and the goal sentences of each task type;
* ``alfworld/data/alfred.pddl`` and ``alfred.twl2``: the PDDL domain and TextWorld grammar
  (the grammar's help action rewritten to the released games' form, `release_grammar`).

Nothing is copied into lmgym: the two Python files are loaded by path as plain modules (importing
the ``alfworld`` package itself would create ``~/.cache/alfworld`` as a side effect), and
everything is parsed once per process (`alfworld_facts` is cached), so making many envs is cheap.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Scenes the official ALFWorld ``valid_unseen`` split draws from (one per room kind:
#: kitchen 10, living room 219, bedroom 308, bathroom 424; read off the folder names of the
#: json_2.1.1 release). The generator's "unseen" split uses only these, "train" never does.
UNSEEN_SCENES = (10, 219, 308, 424)

MISSING_ALFWORLD = (
    "lmgym/ALFWorld-Gen needs the alfworld package's scene layouts, constants and PDDL files. "
    "Install the extra: pip install 'lmgym[textworld]' (it pulls alfworld==0.4.2)."
)


class AlfworldPackageMissing(ImportError):
    """The alfworld wheel (scene layouts, constants, domain) is not installed."""


@dataclass(frozen=True)
class Receptacle:
    object_id: str  # THOR id, e.g. "Cabinet|+00.68|+00.50|-02.20" or "Sink|...|SinkBasin"
    type: str  # ALFRED class, e.g. "Cabinet", "SinkBasin"
    location: tuple[int, int, int, int]  # (x / 0.25 m, z / 0.25 m, rotation / 90 deg, horizon deg)


@dataclass(frozen=True)
class Scene:
    number: int  # FloorPlan number
    kind: str  # "Kitchen", "LivingRoom", "Bedroom" or "Bathroom"
    receptacles: tuple[Receptacle, ...]  # sorted by object id
    object_types: tuple[str, ...]  # classes present in the room, sorted
    floor_points: np.ndarray  # (P, 2) reachable (x, z) points in metres

    @property
    def receptacle_types(self) -> frozenset[str]:
        return frozenset(r.type for r in self.receptacles)


@dataclass(frozen=True)
class AlfworldFacts:
    """Everything read from the wheel, parsed once."""

    constants: types.ModuleType
    goal_library: dict
    domain: str  # alfred.pddl text
    grammar: str  # alfred.twl2 text
    scenes: dict[int, Scene]


def _alfworld_root() -> Path:
    spec = importlib.util.find_spec("alfworld")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise AlfworldPackageMissing(MISSING_ALFWORLD)
    return Path(next(iter(spec.submodule_search_locations)))


def _load_module(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_HELP_BLOCK = re.compile(r'action help \{\s*template :: "help";\s*feedback :: "#help\.feedback#";\s*'
                         r'grammar :: """(.*?)""";\s*\}', re.S)


def release_grammar(wheel_grammar: str) -> str:
    """The wheel's alfred.twl2 in the form the json_2.1.1 games carry.

    The two differ only in the ``help`` action: the wheel words its feedback as a one-rule
    grammar block, the released games inline that rule's text (real newlines) as the feedback.
    Both engines show the same help text for either; lmgym's native engine reads the inline form.
    """
    match = _HELP_BLOCK.search(wheel_grammar)
    if match is None:
        return wheel_grammar  # already in the released form
    text = json.loads(match.group(1))["help.feedback"][0]["rhs"]
    inline = 'action help {\n    template :: "help";\n    feedback :: "' + text + '";\n}'
    return wheel_grammar[: match.start()] + inline + wheel_grammar[match.end():]


def _scene_kind(number: int, scene_type: dict) -> str:
    for kind, numbers in scene_type.items():
        if number in numbers:
            return kind
    raise ValueError(f"FloorPlan{number} is not in any ALFRED room kind")


def _read_scene(layouts: Path, number: int, scene_type: dict) -> Scene:
    poses = json.loads((layouts / f"FloorPlan{number}-openable.json").read_text())
    receptacles = []
    for object_id, (x, z, rotation, horizon) in sorted(poses.items()):
        parts = object_id.split("|")
        # "Sink|x|y|z|SinkBasin": the basin, not the sink, is the receptacle (ALFRED's ids).
        receptacle_type = parts[4] if len(parts) > 4 else parts[0]
        # Grid units as in ALFRED's `loc|x|z|rotation|horizon` (planned_game_state.py).
        location = (round(x / 0.25), round(z / 0.25), round(rotation / 90) % 4, int(horizon))
        receptacles.append(Receptacle(object_id, receptacle_type, location))
    object_types = json.loads((layouts / f"FloorPlan{number}-objects.json").read_text())
    floor_points = np.load(layouts / f"FloorPlan{number}-layout.npy")
    return Scene(number, _scene_kind(number, scene_type), tuple(receptacles),
                 tuple(sorted(set(object_types))), floor_points)


@functools.lru_cache(maxsize=1)
def alfworld_facts() -> AlfworldFacts:
    """Parse the wheel's scene layouts, constants, goal library, domain and grammar (cached)."""
    root = _alfworld_root()
    constants = _load_module(root / "gen" / "constants.py", "lmgym_alfworld_gen_constants")
    goal_library = _load_module(root / "gen" / "goal_library.py", "lmgym_alfworld_gen_goal_library").gdict
    layouts = root / "gen" / "layouts"
    numbers = sorted(int(p.name[len("FloorPlan"):-len("-openable.json")]) for p in layouts.glob("FloorPlan*-openable.json"))
    if not numbers:
        raise AlfworldPackageMissing(f"no FloorPlan*-openable.json under {layouts}. " + MISSING_ALFWORLD)
    scenes = {n: _read_scene(layouts, n, constants.SCENE_TYPE) for n in numbers}
    return AlfworldFacts(
        constants=constants,
        goal_library=goal_library,
        domain=(root / "data" / "alfred.pddl").read_text(),
        grammar=release_grammar((root / "data" / "alfred.twl2").read_text()),
        scenes=scenes,
    )


def split_scenes(split: str) -> tuple[int, ...]:
    """FloorPlan numbers of a split: "train" (all but `UNSEEN_SCENES`), "unseen", or "all"."""
    numbers = sorted(alfworld_facts().scenes)
    if split == "train":
        return tuple(n for n in numbers if n not in UNSEEN_SCENES)
    if split == "unseen":
        return tuple(n for n in numbers if n in UNSEEN_SCENES)
    if split == "all":
        return tuple(numbers)
    raise ValueError(f"split must be 'train', 'unseen' or 'all', got {split!r}")
