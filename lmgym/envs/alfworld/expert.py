"""The ALFWorld expert: the next command from any reachable state, with one line of reasoning.

It reads the goal of the game (the PDDL goal, not the task type's name) into a `GoalSpec`:
which object type to handle, how many, which state it must reach (clean, hot, cool), and where
it must end (a receptacle type, or held under a lamp type). It then plans on the native
engine's full symbolic state, like ALFWorld's planner expert (which replans with Fast Downward
every step) rather than its hand-coded explorer: it knows where every object is.

The policy, recomputed from scratch at every step (so it recovers from any detour):
put down anything useless that is held; fetch a fitting object (go to its receptacle, open it,
take it); bring it to the appliance that cleans, heats or cools it; bring it to the target
receptacle (open, move) or, for look-at-in-light tasks, to a lamp and switch it on.
Every walk is one ``go to``, so a plan is at most about a dozen commands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lmgym.envs.alfworld.engine import NativeEngine

#: The state predicate each modifier needs, the appliance type that gives it, its verb.
MODIFIERS = {
    "isclean": ("sinkbasintype", "clean", "cleanable"),
    "ishot": ("microwavetype", "heat", "heatable"),
    "iscool": ("fridgetype", "cool", "coolable"),
}


@dataclass(frozen=True)
class GoalSpec:
    object_type: str  # e.g. "appletype"
    count: int = 1
    modifier: str | None = None  # "isclean" | "ishot" | "iscool"
    receptacle_type: str | None = None  # where the objects must end
    lamp_type: str | None = None  # look-at-in-light: hold the object next to this, switched on


def _atoms(formula: Any) -> list[list[str]]:
    if isinstance(formula, str) or not formula:
        return []
    if all(isinstance(part, str) for part in formula):
        return [formula]
    return [atom for part in formula[1:] for atom in _atoms(part)]


def goal_spec(goal: Any) -> GoalSpec:
    """Read an ALFWorld goal formula into a `GoalSpec` (raises ValueError on other goals)."""
    atoms = [a for a in _atoms(goal) if a[0] not in ("=", "not")]
    types = {a[1]: a[2] for a in atoms if a[0] == "objecttype"}
    placed = sorted({a[1] for a in atoms if a[0] == "inreceptacle" and a[1] in types})
    held = [a[2] for a in atoms if a[0] == "holds"]
    toggled = [a[1] for a in atoms if a[0] == "istoggled"]
    receptacle_types = [a[2] for a in atoms if a[0] == "receptacletype"]
    modifier = next((a[0] for a in atoms if a[0] in MODIFIERS), None)
    if held and toggled:
        return GoalSpec(types[held[0]], lamp_type=types[toggled[0]])
    if placed and receptacle_types:
        return GoalSpec(types[placed[0]], count=len(placed), modifier=modifier, receptacle_type=receptacle_types[0])
    raise ValueError(f"not an ALFWorld goal the expert knows: {goal}")


class DeadEnd(Exception):
    """The task cannot be finished from this state (e.g. the hands hold an object no
    receptacle accepts: nothing in the ALFRED domain can free them)."""


class Expert:
    """``Expert(engine).act() -> (command, reasoning)`` for a `NativeEngine` mid-game."""

    def __init__(self, engine: NativeEngine):
        self.engine = engine
        self.world = engine.world
        self.spec = goal_spec(self.world.problem.goal)

    # -- reading the state ---------------------------------------------------------------
    def _name(self, entity: str) -> str:
        return self.world.names[entity]

    def _fits(self, obj: str) -> bool:
        w, spec = self.world, self.spec
        if spec.object_type not in w.object_types.get(obj, ()):
            return False
        return spec.modifier is None or obj in getattr(w, MODIFIERS[spec.modifier][2])

    def _done(self, obj: str) -> bool:
        return self.spec.modifier is None or self.engine.has(self.spec.modifier, obj)

    def _placed(self, receptacle: str) -> list[str]:
        return [o for o in self.engine.contents(receptacle) if self._fits(o) and self._done(o)]

    def _target_receptacle(self) -> str | None:
        """The target receptacle already holding most finished objects (ties: list order)."""
        candidates = self.world.receptacles_of_type(self.spec.receptacle_type)
        return max(candidates, key=lambda r: len(self._placed(r)), default=None)

    def _closest_first(self, receptacles: list[str]) -> list[str]:
        here = self.engine.location
        return sorted(receptacles, key=lambda r: self.world.location_of(r) != here)

    # -- acting ----------------------------------------------------------------------------
    def act(self) -> tuple[str, str]:
        if self.engine.won:
            return "look", "The task is done."
        try:
            return self._plan()
        except DeadEnd as reason:
            return "look", f"{reason}; the task cannot be finished from here."

    def _plan(self) -> tuple[str, str]:
        held = self.engine.held
        if held and not self._useful(held[0]):
            return self._put_down(held[0])
        if self.spec.lamp_type is not None:
            return self._look_in_light(held)
        return self._pick_and_place(held)

    def _useful(self, obj: str) -> bool:
        if not self._fits(obj):
            return False
        if self.spec.receptacle_type is None:
            return True
        target = self._target_receptacle()
        return target is None or obj not in self._placed(target)

    def _pick_and_place(self, held: list[str]) -> tuple[str, str]:
        spec, target = self.spec, self._target_receptacle()
        goal = f"{spec.count} " if spec.count > 1 else "a "
        goal += f"{self._what()} in a {spec.receptacle_type.removesuffix('type')}"
        if not held:
            return self._fetch(exclude=self._placed(target) if target else [], why=f"I need {goal}")
        obj = held[0]
        if not self._done(obj):
            appliance_type, verb, _ = MODIFIERS[spec.modifier]
            appliance = self._closest_first(self.world.receptacles_of_type(appliance_type))[0]
            return self._use_receptacle(appliance, f"{verb} {self._name(obj)} with {self._name(appliance)}",
                                        f"I hold the {self._name(obj)}; it must be {verb}ed before it goes in the target, "
                                        f"with the {self._name(appliance)}")
        return self._use_receptacle(target, f"move {self._name(obj)} to {self._name(target)}",
                                    f"The {self._name(obj)} is ready; it goes in the {self._name(target)}")

    def _look_in_light(self, held: list[str]) -> tuple[str, str]:
        spec = self.spec
        if not held:
            return self._fetch(exclude=[], why=f"I need to hold a {self._what()} under a {spec.lamp_type.removesuffix('type')}")
        lamps = [(o, r) for (o, r) in sorted(self.engine.facts["inreceptacle"])
                 if spec.lamp_type in self.world.object_types.get(o, ()) and o in self.world.toggleable]
        lamps.sort(key=lambda pair: self.world.location_of(pair[1]) != self.engine.location)
        if not lamps:
            raise DeadEnd(f"No {spec.lamp_type.removesuffix('type')} stands in a receptacle")
        lamp, receptacle = lamps[0]
        return self._use_receptacle(receptacle, f"use {self._name(lamp)}",
                                    f"I hold the {self._name(held[0])}; I switch on the {self._name(lamp)} "
                                    f"on the {self._name(receptacle)} to look at it")

    def _what(self) -> str:
        kind = self.spec.object_type.removesuffix("type")
        prefix = {"isclean": "clean ", "ishot": "hot ", "iscool": "cool "}.get(self.spec.modifier, "")
        return prefix + kind

    def _fetch(self, exclude: list[str], why: str) -> tuple[str, str]:
        """Go to, open, or take from the receptacle of the best fitting object."""
        found = [(o, r) for (o, r) in sorted(self.engine.facts["inreceptacle"])
                 if self._fits(o) and o not in exclude and o in self.world.pickupable]
        # Finished objects first (no appliance trip), then the ones closest to the agent.
        found.sort(key=lambda pair: (not self._done(pair[0]), self.world.location_of(pair[1]) != self.engine.location))
        if not found:
            raise DeadEnd(f"No {self._what()} is left that I could take")
        obj, receptacle = found[0]
        return self._use_receptacle(receptacle, f"take {self._name(obj)} from {self._name(receptacle)}",
                                    f"{why}; the {self._name(obj)} is in the {self._name(receptacle)}, so I take it")

    def _put_down(self, obj: str) -> tuple[str, str]:
        """Free the hands: the first receptacle here that takes the object, else the nearest one."""
        w = self.world
        fitting = [r for r, _ in w.receptacles_at
                   if any((rt, ot) in w.can_contain for ot in w.object_types.get(obj, ())
                          for rt in w.receptacle_types.get(r, ()))]
        target = self._target_receptacle() if self.spec.receptacle_type else None
        choices = [r for r in fitting if r != target] or fitting
        if not choices:
            raise DeadEnd(f"I hold the {self._name(obj)} and no receptacle accepts it")
        # Prefer receptacles that need no opening, then those here.
        choices.sort(key=lambda r: (r in w.openable and not self.engine.is_open(r), w.location_of(r) != self.engine.location))
        receptacle = choices[0]
        return self._use_receptacle(receptacle, f"move {self._name(obj)} to {self._name(receptacle)}",
                                    f"The {self._name(obj)} does not help with the task; I put it down in the {self._name(receptacle)}")

    def _use_receptacle(self, receptacle: str, command: str, why: str) -> tuple[str, str]:
        """Walk to `receptacle`, open it if a take/move needs it open, then run `command`."""
        engine, name = self.engine, self._name(receptacle)
        if self.world.location_of(receptacle) != engine.location:
            return f"go to {name}", f"{why}. I go to the {name}."
        needs_open = command.startswith(("take ", "move ")) and receptacle in self.world.openable
        if needs_open and not engine.is_open(receptacle):
            return f"open {name}", f"{why}. The {name} is closed; I open it."
        return command, f"{why}."
