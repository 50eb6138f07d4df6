"""Procedural ALFWorld households: solvable games in the official game.tw-pddl layout.

`generate_game(seed, knobs)` draws, from one seeded ``numpy`` generator:

1. a task type among ``knobs.task_types`` and a room (FloorPlan) of the split whose kind allows it
   (ALFRED's ``GOALS_VALID``) and which has the tool it needs (sink basin, microwave, fridge, a
   desk lamp and a table or dresser to stand it on);
2. the target object class (present in that room, and cleanable / heatable / coolable as the task
   needs, per ``VAL_ACTION_OBJECTS``) and the goal receptacle class (one of the room's receptacles
   that may hold it, per ``VAL_RECEPTACLE_OBJECTS``);
3. the receptacles kept (all of the room's by default; ``num_receptacles`` keeps the needed ones
   plus random others), with their real THOR ids and agent poses;
4. the objects: 1-3 instances of the target (2-3 for pick-two, as ALFRED's ``PICKUP_REPEAT_MAX``
   style repeats), a desk lamp for look-at tasks, and ``num_distractors`` other objects of the
   room's classes, each placed in a kept receptacle that ALFRED allows for its class; never a
   target in a goal-class receptacle, so no game is won at reset;
5. openable receptacles (``OPENABLE_CLASS_LIST``) closed with probability ``closed_prob``;
6. the agent's start pose: a reachable floor point of the room's layout.

The game is written as ALFWorld writes it (``pddl_domain``, ``grammar`` with the goal sentence in
place of ``UNKNOWN GOAL``, ``pddl_problem``, ``solvable``, ``walkthrough``): the problem follows
the sections and naming of the json_2.1.1 release (``Apple_bar__minus_00_dot_47_...`` ids from
ALFRED's ``fix_pddl_str_chars``; the goal formula from ``goal_library.gdict``). The walkthrough
is a plan written from the full initial state by `plan_walkthrough`; the checks in
`lmgym.envs.alfworld.gen.check` run it through the engines.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from lmgym.envs.alfworld.engine import demangle_names
from lmgym.envs.alfworld.games import TASK_TYPES
from lmgym.envs.alfworld.gen.scenes import Receptacle, Scene, alfworld_facts, split_scenes


#: The receptacle class a task needs as a tool, and the command verb that uses it.
TOOLS = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "clean"),  # the shipped domain cleans in SinkBasin only
    "pick_heat_then_place_in_recep": ("Microwave", "heat"),
    "pick_cool_then_place_in_recep": ("Fridge", "cool"),
}
#: What each tool-using task needs of the target class (ALFRED's VAL_ACTION_OBJECTS keys).
TOOL_ABILITY = {
    "pick_clean_then_place_in_recep": "Cleanable",
    "pick_heat_then_place_in_recep": "Heatable",
    "pick_cool_then_place_in_recep": "Coolable",
}
LAMP = "DeskLamp"
#: Where ALFRED's rooms stand desk lamps (the json_2.1.1 look-at games put them on these classes;
#: DeskLamp is in no VAL_RECEPTACLE_OBJECTS set since it is never moved). FloorLamp stands on no
#: receptacle, and the domain's ToggleObject needs one, so look-at tasks use desk lamps.
LAMP_STANDS = ("Desk", "Dresser", "SideTable")


@dataclass(frozen=True)
class GenKnobs:
    """Difficulty knobs of the generator (the defaults mirror the official games)."""

    #: Task types drawn uniformly.
    task_types: tuple[str, ...] = TASK_TYPES
    #: Objects besides the target instances and the lamp.
    num_distractors: int = 15
    #: Receptacles kept in the room (None: all of the room's, as the official games).
    num_receptacles: int | None = None
    #: Probability that an openable receptacle starts closed (the official games: all closed).
    closed_prob: float = 1.0
    #: "train" (rooms of the training split), "unseen" (the held-out rooms) or "all".
    split: str = "train"

    def __post_init__(self):
        unknown = [t for t in self.task_types if t not in TASK_TYPES]
        if unknown or not self.task_types:
            raise ValueError(f"task_types must be a non-empty subset of {TASK_TYPES}, got {self.task_types}")
        if self.num_distractors < 0:
            raise ValueError(f"num_distractors must be >= 0, got {self.num_distractors}")
        if self.num_receptacles is not None and self.num_receptacles < 3:
            raise ValueError(f"num_receptacles must be None or >= 3, got {self.num_receptacles}")
        if not 0.0 <= self.closed_prob <= 1.0:
            raise ValueError(f"closed_prob must be in [0, 1], got {self.closed_prob}")
        split_scenes(self.split)  # validates the name


@dataclass
class Household:
    """A generated game: the official game.tw-pddl dict and what it was built from."""

    game: dict  # pddl_domain, grammar, pddl_problem, solvable, walkthrough
    seed: int
    scene: int
    task_type: str
    task: str  # the goal sentence
    target: str  # object class
    receptacle: str | None  # goal receptacle class (None for look-at)

    def traj_data(self) -> dict:
        """The part of ALFRED's ``traj_data.json`` that ALFWorld reads for text games: the task
        type (``AlfredTWEnv`` filters on it) and ``pddl_params`` (its hand-coded expert's goal)."""
        return {
            "task_type": self.task_type,
            "scene": {"floor_plan": f"FloorPlan{self.scene}"},
            "pddl_params": {
                "object_target": self.target,
                "parent_target": self.receptacle or "",
                "toggle_target": LAMP if self.task_type == "look_at_obj_in_light" else "",
                "mrecep_target": "",
                "object_sliced": False,
            },
        }


# -- ids and names ------------------------------------------------------------------------
_PDDL_CHARS = {"-": "_minus_", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}
_PDDL_CHARS_RE = re.compile("|".join(re.escape(c) for c in _PDDL_CHARS))


def pddl_id(thor_id: str) -> str:
    """THOR id to PDDL name, one pass, as ALFRED's ``PlannedGameState.fix_pddl_str_chars``."""
    return _PDDL_CHARS_RE.sub(lambda m: _PDDL_CHARS[m.group(0)], thor_id)


def location_id(location: tuple[int, int, int, int]) -> str:
    return pddl_id("loc|%d|%d|%d|%d" % location)


def display_names(ids: list[str]) -> dict[str, str]:
    """Displayed names ("cabinet 3") of PDDL ids, keyed by the ids as given.

    The engines lower-case every PDDL name (Fast Downward does) before ALFWorld's Demangler
    numbers them, so the numbering is that of `demangle_names` over the lower-cased ids.
    """
    lowered = {i.lower(): i for i in ids}
    return {lowered[low]: name for low, name in demangle_names(sorted(lowered)).items()}


# -- generation -----------------------------------------------------------------------------
def _pickupable_classes(constants) -> frozenset[str]:
    fits = set().union(*constants.VAL_RECEPTACLE_OBJECTS.values())
    return frozenset(c for c in fits if not c.endswith("Sliced"))


def _holders(scene_receptacles, object_class: str, constants) -> list[Receptacle]:
    return [r for r in scene_receptacles if object_class in constants.VAL_RECEPTACLE_OBJECTS.get(r.type, ())]


def _task_options(scene: Scene, task_type: str, constants) -> list[tuple[str, str | None]]:
    """Every (target class, goal receptacle class) a task type can use in a room, sorted."""
    if scene.kind not in constants.GOALS_VALID[task_type]:
        return []
    pickupable = _pickupable_classes(constants)
    candidates = [c for c in scene.object_types if c in pickupable]
    if task_type == "look_at_obj_in_light":
        if LAMP not in scene.object_types or not any(r.type in LAMP_STANDS for r in scene.receptacles):
            return []
        return [(c, None) for c in candidates if _holders(scene.receptacles, c, constants)]
    if task_type in TOOLS:
        tool, _ = TOOLS[task_type]
        if tool not in scene.receptacle_types:
            return []
        able = constants.VAL_ACTION_OBJECTS[TOOL_ABILITY[task_type]]
        candidates = [c for c in candidates if c in able]
    options = []
    for target in candidates:
        holders = _holders(scene.receptacles, target, constants)
        for goal in sorted({r.type for r in holders}):
            if task_type in TOOLS and goal == TOOLS[task_type][0]:
                continue  # "put a cool apple in fridge" would be solved by the tool itself
            # the target must start somewhere that is not of the goal class
            if any(r.type != goal for r in holders):
                options.append((target, goal))
    return options


@functools.lru_cache(maxsize=64)
def _rooms_for(split: str, task_type: str) -> tuple[tuple[int, tuple], ...]:
    """(FloorPlan number, its task options) of every room of `split` that allows `task_type`."""
    facts = alfworld_facts()
    rooms = ((n, tuple(_task_options(facts.scenes[n], task_type, facts.constants))) for n in split_scenes(split))
    return tuple((n, options) for n, options in rooms if options)


def generate_game(seed: int, knobs: GenKnobs = GenKnobs()) -> Household:
    """One solvable household from `seed` (same seed and knobs, same game, in any process)."""
    facts = alfworld_facts()
    constants = facts.constants
    rng = np.random.default_rng(seed)

    # --- task type, room, target, goal receptacle class ---------------------------------
    task_types = [t for t in knobs.task_types if _rooms_for(knobs.split, t)]
    if not task_types:
        raise ValueError(f"no room of split {knobs.split!r} allows any of {knobs.task_types}")
    task_type = task_types[int(rng.integers(len(task_types)))]
    rooms = _rooms_for(knobs.split, task_type)
    number, options = rooms[int(rng.integers(len(rooms)))]
    scene = facts.scenes[number]
    target, goal_class = options[int(rng.integers(len(options)))]

    # --- receptacles kept ---------------------------------------------------------------
    receptacles = list(scene.receptacles)
    if knobs.num_receptacles is not None and len(receptacles) > knobs.num_receptacles:
        receptacles = _keep_receptacles(rng, scene, task_type, target, goal_class, knobs.num_receptacles, constants)

    # --- objects --------------------------------------------------------------------------
    placements: list[tuple[str, Receptacle]] = []  # (object class, receptacle)
    target_holders = [r for r in _holders(receptacles, target, constants) if r.type != goal_class]
    low = 2 if task_type == "pick_two_obj_and_place" else 1
    for _ in range(int(rng.integers(low, 4))):
        placements.append((target, target_holders[int(rng.integers(len(target_holders)))]))
    if task_type == "look_at_obj_in_light":
        stands = [r for r in receptacles if r.type in LAMP_STANDS]
        placements.append((LAMP, stands[int(rng.integers(len(stands)))]))
    pickupable = _pickupable_classes(constants)
    distractor_classes = [c for c in scene.object_types if c in pickupable and c != target
                          and _holders(receptacles, c, constants)]
    for _ in range(knobs.num_distractors if distractor_classes else 0):
        cls = distractor_classes[int(rng.integers(len(distractor_classes)))]
        holders = _holders(receptacles, cls, constants)
        placements.append((cls, holders[int(rng.integers(len(holders)))]))
    objects = _object_ids(rng, placements)  # [(pddl id, class, receptacle)]

    # --- open/closed, start pose ----------------------------------------------------------
    openable = [r for r in receptacles if r.type in constants.OPENABLE_CLASS_SET]
    opened = [r for r in openable if rng.random() >= knobs.closed_prob]
    taken = {r.location for r in receptacles}
    while True:
        x, z = scene.floor_points[int(rng.integers(len(scene.floor_points)))]
        start = (round(x / 0.25), round(z / 0.25), int(rng.integers(4)), 30)
        if start not in taken:
            break

    # --- goal sentence, problem, names, walkthrough ----------------------------------------
    goal = facts.goal_library[task_type]
    fill = {"obj": target, "recep": goal_class or "", "toggle": LAMP, "mrecep": ""}
    template = goal["templates"][int(rng.integers(len(goal["templates"])))]
    task = template.format(**{k: v.lower() for k, v in fill.items()})
    problem = _problem_text(seed, receptacles, objects, openable, opened, start,
                            goal["pddl"].format(**fill).replace("#", "-"), constants)
    ids = [pddl_id(r.object_id) for r in receptacles] + [o for o, _, _ in objects]
    names = display_names(ids)
    walkthrough = plan_walkthrough(task_type, target, goal_class, receptacles, objects,
                                   {pddl_id(r.object_id) for r in opened}, names, constants)
    game = {
        "pddl_domain": facts.domain,
        "grammar": facts.grammar.replace("UNKNOWN GOAL", task),
        "pddl_problem": problem,
        "solvable": True,
        "walkthrough": walkthrough,
    }
    return Household(game, seed, scene.number, task_type, task, target, goal_class)


def _keep_receptacles(rng, scene, task_type, target, goal_class, count, constants) -> list[Receptacle]:
    """The receptacles a task needs (one of each needed class) plus random others, up to `count`."""
    pool = list(scene.receptacles)
    needed: list[Receptacle] = []

    def take_one(candidates):
        candidates = [r for r in candidates if r not in needed]
        if candidates:
            needed.append(candidates[int(rng.integers(len(candidates)))])

    if goal_class is not None:
        take_one([r for r in pool if r.type == goal_class])
    take_one([r for r in _holders(pool, target, constants) if r.type != goal_class])
    if task_type in TOOLS:
        take_one([r for r in pool if r.type == TOOLS[task_type][0]])
    if task_type == "look_at_obj_in_light":
        take_one([r for r in pool if r.type in LAMP_STANDS])
    others = [r for r in pool if r not in needed]
    extra = max(0, count - len(needed))
    chosen = [others[i] for i in sorted(rng.permutation(len(others))[:extra])]
    return sorted(needed + chosen, key=lambda r: r.object_id)


def _object_ids(rng, placements) -> list[tuple[str, str, Receptacle]]:
    """Give each placed object a THOR-style id: its class and a point near its receptacle."""
    used: set[str] = set()
    objects = []
    for cls, receptacle in placements:
        rx, ry, rz = (float(v) for v in receptacle.object_id.split("|")[1:4])
        while True:
            # Objects rest on or in their receptacle: within 0.4 m across, up to 0.3 m above.
            x, y, z = rx + rng.uniform(-0.4, 0.4), ry + rng.uniform(0.0, 0.3), rz + rng.uniform(-0.4, 0.4)
            object_id = pddl_id(f"{cls}|{x:+06.2f}|{y:+06.2f}|{z:+06.2f}")
            if object_id not in used:
                break
        used.add(object_id)
        objects.append((object_id, cls, receptacle))
    return objects


def _problem_text(seed, receptacles, objects, openable, opened, start, goal_pddl, constants) -> str:
    """The pddl_problem, in the sections and order of the json_2.1.1 games."""
    static = sorted(set(constants.RECEPTACLES) - set(constants.MOVABLE_RECEPTACLES))
    object_classes = sorted(set(constants.OBJECTS_SET) - set(static))
    abilities = constants.VAL_ACTION_OBJECTS
    pickupable = _pickupable_classes(constants)
    rids = {r.object_id: pddl_id(r.object_id) for r in receptacles}
    locations = sorted({location_id(r.location) for r in receptacles} | {location_id(start)})
    present_classes = sorted({cls for _, cls, _ in objects})
    present_types = sorted({r.type for r in receptacles})

    declarations = ["agent1 - agent"]
    declarations += [f"{c}Type - otype" for c in object_classes]
    declarations += [f"{c}Type - rtype" for c in static]
    declarations += [f"{o} - object" for o, _, _ in objects]
    declarations += [f"{rids[r.object_id]} - receptacle" for r in receptacles]
    declarations += [f"{loc} - location" for loc in locations]

    init = [f"(receptacleType {rids[r.object_id]} {r.type}Type)" for r in receptacles]
    init += [f"(objectType {o} {cls}Type)" for o, cls, _ in objects]
    init += [f"(canContain {t}Type {c}Type)" for t in present_types for c in present_classes
             if c in constants.VAL_RECEPTACLE_OBJECTS.get(t, ())]
    init += [f"(pickupable {o})" for o, cls, _ in objects if cls in pickupable]
    init += [f"(isReceptacleObject {o})" for o, cls, _ in objects if cls in constants.MOVABLE_RECEPTACLES_SET]
    init += [f"(openable {rids[r.object_id]})" for r in openable]
    init += [f"(opened {rids[r.object_id]})" for r in opened]
    init += [f"(atLocation agent1 {location_id(start)})"]
    for predicate, ability in (("cleanable", "Cleanable"), ("heatable", "Heatable"), ("coolable", "Coolable"),
                               ("toggleable", "Toggleable"), ("sliceable", "Sliceable")):
        init += [f"({predicate} {o})" for o, cls, _ in objects if cls in abilities[ability]]
    init += [f"(inReceptacle {o} {rids[r.object_id]})" for o, _, r in objects]
    init += [f"(receptacleAtLocation {rids[r.object_id]} {location_id(r.location)})" for r in receptacles]
    init += [f"(objectAtLocation {o} {location_id(r.location)})" for o, _, r in objects]

    lines = ["", f"(define (problem plan_lmgym_gen_{seed})", "(:domain alfred)", "(:objects"]
    lines += ["        " + d for d in declarations]
    lines += ["        )", "", "(:init"]
    lines += ["        " + fact for fact in init]
    lines += ["        )", "", goal_pddl]
    return "\n".join(lines)


# -- the walkthrough ---------------------------------------------------------------------------
def plan_walkthrough(task_type, target, goal_class, receptacles, objects, opened, names, constants) -> list[str]:
    """A plan from the full initial state, in the v0.4 grammar (``move X to Y``).

    Take the target instance(s) whose receptacle comes first by displayed name, open what is
    closed on the way, use the tool (the first of its class) for clean/heat/cool tasks, and
    move it to the first goal-class receptacle; for look-at tasks carry the target to the
    desk lamp's receptacle and switch the lamp on (the goal: lamp toggled, agent there,
    target held).
    """
    rids = {r.object_id: pddl_id(r.object_id) for r in receptacles}
    is_open = set(opened)
    commands: list[str] = []
    here: list[tuple | None] = [None]  # the agent's location; the start pose is no receptacle's

    def go(receptacle: Receptacle):
        # The engines admit no "go to" a receptacle at the agent's own location: several
        # receptacles (a column of drawers) often share one pose.
        if here[0] != receptacle.location:
            commands.append(f"go to {names[rids[receptacle.object_id]]}")
            here[0] = receptacle.location

    def visit(receptacle: Receptacle):
        go(receptacle)
        rid = rids[receptacle.object_id]
        if receptacle.type in constants.OPENABLE_CLASS_SET and rid not in is_open:
            commands.append(f"open {names[rid]}")
            is_open.add(rid)

    def first(candidates):
        return min(candidates, key=lambda r: names[rids[r.object_id]])

    def name(receptacle: Receptacle) -> str:
        return names[rids[receptacle.object_id]]

    instances = sorted((o for o in objects if o[1] == target), key=lambda o: (name(o[2]), names[o[0]]))
    count = 2 if task_type == "pick_two_obj_and_place" else 1
    for object_id, _, source in instances[:count]:
        visit(source)
        commands.append(f"take {names[object_id]} from {name(source)}")
        if task_type in TOOLS:
            tool_class, verb = TOOLS[task_type]
            tool = first([r for r in receptacles if r.type == tool_class])
            go(tool)
            commands.append(f"{verb} {names[object_id]} with {name(tool)}")
        if task_type == "look_at_obj_in_light":
            lamp_id, _, stand = next(o for o in objects if o[1] == LAMP)
            go(stand)
            commands.append(f"use {names[lamp_id]}")
        else:
            goal = first([r for r in receptacles if r.type == goal_class])
            visit(goal)
            commands.append(f"move {names[object_id]} to {name(goal)}")
    return commands
