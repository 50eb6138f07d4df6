"""The grounded ALFWorld teacher: acts and reasons only on what the agent has read so far.

`lmgym.envs.alfworld.expert.Expert` plans on the engine's full state ("the cellphone 3 is in
the drawer 12" before anything was opened). This teacher sees what an agent sees: the room
listing and task sentence of the first observation, the feedback of every step, and the
public info keys (``task``, ``admissible_actions``, ``action_valid``, ``won``). It:

1. reads the task sentence into the expert's `GoalSpec` (`task_goal`: the six official
   sentence templates of ALFWorld's goal library);
2. remembers what each feedback showed (`RoomMemory`: where it stands, what it holds, what
   lies in each receptacle it looked into, which receptacles are closed, what it cleaned,
   heated or cooled);
3. while no fitting object has been seen, goes to the unexplored receptacle with the best
   chance per step of holding one, from the training-game priors of
   `lmgym.envs.alfworld.priors` (the chance a visit finds one, divided by the expected steps
   to see inside: 1, plus 1 for a receptacle type that usually starts closed), and opens what
   is closed;
4. then carries on as the expert does: take the object, clean/heat/cool it at the appliance
   (sink basin, microwave, fridge), put it in the target receptacle (for two objects: the
   same one), or hold it by a lamp (found the same way) and switch the lamp on.

Every step returns (command, one reasoning line citing only visible facts and the priors).
Memory is rebuilt from observations, not from the teacher's own commands, so the teacher can
also label states another policy reached (DAgger), as long as it sees every observation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from lmgym.envs.alfworld.expert import GoalSpec
from lmgym.envs.alfworld.priors import display_type, load_priors

#: The official task sentences (ALFWorld's goal_library, as json_2.1.1 and ALFWorld-Gen write them).
_TASK_PATTERNS = (
    (re.compile(r"^put (?:a|some) (?:(?P<mod>clean|hot|cool) )?(?P<obj>\S+) (?:in|on) (?P<rec>[^\s.]+)\.?$"), 1),
    (re.compile(r"^(?P<mod>clean|heat|cool) some (?P<obj>\S+) and put it in (?P<rec>[^\s.]+)\.?$"), 1),
    (re.compile(r"^(?:find two (?P<obj>\S+) and put them in|put two (?P<obj2>\S+) in) (?P<rec>[^\s.]+)\.?$"), 2),
    (re.compile(r"^(?:examine the (?P<obj>\S+) with the|look at (?P<obj2>\S+) under the) (?P<lamp>[^\s.]+)\.?$"), 1),
)
#: Task words for each modifier -> the expert's predicate name.
_MODIFIER_WORDS = {"clean": "isclean", "hot": "ishot", "heat": "ishot", "cool": "iscool"}
#: Predicate -> (appliance type word, verb, past participle) (the domain: SinkBasin, Microwave, Fridge).
APPLIANCES = {"isclean": ("sinkbasin", "clean", "cleaned"), "ishot": ("microwave", "heat", "heated"),
              "iscool": ("fridge", "cool", "cooled")}

_INTRO = re.compile(r"Looking quickly around you, you see (?P<items>.*?)\.\s*(?:\n|$)")
_ARRIVE = re.compile(r"^You arrive at (?P<rec>.+?)\. ")
_OPEN = re.compile(r"^You open the (?P<rec>.+?)\. ")
_CLOSED = re.compile(r"The (?P<rec>.+?) is closed\.$")
_INSIDE = re.compile(r"The (?P<rec>.+?) is open\. In it, you see (?P<items>.*)\.$")
_ON = re.compile(r"On the (?P<rec>.+?), you see (?P<items>.*)\.$")
_TAKE = re.compile(r"^You pick up the (?P<obj>.+?) from the (?P<rec>.+?)\.$")
_MOVE = re.compile(r"^You move the (?P<obj>.+?) to the (?P<rec>.+?)\.$")
_TREAT = re.compile(r"^You (?P<verb>heat|cool|clean) the (?P<obj>.+?) using the (?P<rec>.+?)\.$")
_CLOSE = re.compile(r"^You close the (?P<rec>.+?)\.$")

#: Smoothing of the per-visit chance: PRIOR_WEIGHT pseudo-visits at PRIOR_RATE (a type pair the
#: training games never show together still gets a small, equal chance).
PRIOR_WEIGHT, PRIOR_RATE = 1.0, 0.02


def task_goal(task: str) -> GoalSpec:
    """Read a task sentence (``"put a clean apple in fridge."``) into a `GoalSpec`."""
    text = task.strip().removeprefix("Your task is to: ").strip()
    for pattern, count in _TASK_PATTERNS:
        match = pattern.match(text)
        if match is None:
            continue
        parts = match.groupdict()
        obj = parts.get("obj") or parts.get("obj2")
        modifier = _MODIFIER_WORDS.get(parts.get("mod") or "")
        if parts.get("lamp"):
            return GoalSpec(f"{obj}type", lamp_type=f"{parts['lamp']}type")
        return GoalSpec(f"{obj}type", count=count, modifier=modifier, receptacle_type=f"{parts['rec']}type")
    raise ValueError(f"not an ALFWorld task sentence: {task!r}")


def _items(listing: str) -> list[str]:
    """``"a apple 1, a bread 2, and a knife 1"`` -> ``["apple 1", "bread 2", "knife 1"]``."""
    if listing.strip() == "nothing":
        return []
    parts = re.split(r", and |, | and ", listing.strip())
    return [p.removeprefix("a ").removeprefix("an ").strip() for p in parts if p.strip()]


def _natural_key(name: str) -> tuple[str, int]:
    kind, _, number = name.rpartition(" ")
    return (kind, int(number)) if number.isdigit() else (name, 0)


@dataclass
class RoomMemory:
    """What the agent has read: receptacles, where it is, what it holds and has seen where."""

    receptacles: list[str] = field(default_factory=list)
    contents: dict[str, list[str]] = field(default_factory=dict)  # looked-into receptacles only
    closed: set[str] = field(default_factory=set)
    location: str | None = None
    held: str | None = None
    beside: set[str] = field(default_factory=set)  # receptacles at the agent's spot
    treated: dict[str, set[str]] = field(default_factory=dict)  # object -> predicates it reached

    def read(self, observation: str, admissible: list[str] | None = None) -> None:
        """Update from one observation (the reset text or a step's feedback) and, when given,
        the admissible commands: the engine offers no ``go to`` for the receptacles that share
        the agent's spot (two stove burners, a cabinet pair), so those are `beside` it."""
        text = observation.strip()
        intro = _INTRO.search(text)
        if intro and not self.receptacles:
            self.receptacles = _items(intro["items"])
        if admissible:
            offered = set(admissible)
            self.beside = {r for r in self.receptacles if f"go to {r}" not in offered}
        if match := _ARRIVE.match(text):
            self.location = match["rec"]
            self._examine(match["rec"], text[match.end():])
        elif match := _OPEN.match(text):
            self._examine(match["rec"], text[match.end():])
        elif match := (_CLOSED.match(text) or _INSIDE.match(text) or _ON.match(text)):
            self._examine(match["rec"], text)  # the feedback of "examine <receptacle>"
        elif match := _TAKE.match(text):
            self.held = match["obj"]
            self._remove(match["rec"], match["obj"])
        elif match := _MOVE.match(text):
            self.held = None
            self.contents.setdefault(match["rec"], []).append(match["obj"])
        elif match := _TREAT.match(text):
            predicate = {"heat": "ishot", "cool": "iscool", "clean": "isclean"}[match["verb"]]
            done = self.treated.setdefault(match["obj"], set())
            done.add(predicate)
            done.discard({"ishot": "iscool", "iscool": "ishot"}.get(predicate, ""))  # heating undoes cooling
        elif match := _CLOSE.match(text):
            self.closed.add(match["rec"])

    def at(self, receptacle: str) -> bool:
        """Whether the agent can act on `receptacle` without walking."""
        return receptacle == self.location or receptacle in self.beside

    def _examine(self, receptacle: str, text: str) -> None:
        if _CLOSED.match(text):
            self.closed.add(receptacle)
            return
        self.closed.discard(receptacle)
        match = _INSIDE.match(text) or _ON.match(text)
        if match:
            self.contents[receptacle] = _items(match["items"])

    def _remove(self, receptacle: str, obj: str) -> None:
        if obj in self.contents.get(receptacle, []):
            self.contents[receptacle].remove(obj)

    def where(self, obj_type: str) -> list[tuple[str, str]]:
        """(object, receptacle) pairs seen, of the given display type, in receptacle order."""
        return [(o, r) for r in sorted(self.contents, key=_natural_key) for o in self.contents[r]
                if display_type(o) == obj_type]


class ALFWorldTeacher:
    """``act(observation, info) -> (command, reasoning)`` from visible facts only.

    Args:
        priors: which table of `lmgym.envs.alfworld.priors` orders the search: ``"train"``
            (the official train games, for ``lmgym/ALFWorld-v0``) or ``"gen"`` (the
            ALFWorld-Gen generator, for the ``-Gen`` ids).
    """

    def __init__(self, priors: str = "train"):
        self.priors_name = priors
        self.priors = load_priors(priors)
        self.source = "training games" if priors == "train" else "generated training games"
        self.reset()

    def reset(self) -> None:
        self.memory = RoomMemory()
        self.goal: GoalSpec | None = None

    # -- the public step ---------------------------------------------------------------------
    def act(self, observation: str, info: Mapping[str, Any]) -> tuple[str, str]:
        admissible = info.get("admissible_actions") or []
        self.memory.read(observation, admissible)
        if self.goal is None:
            self.goal = task_goal(info["task"])
        if info.get("won"):
            return "look", "The task is done."
        return self._plan(set(admissible))

    # -- the plan ----------------------------------------------------------------------------
    @property
    def _object(self) -> str:
        return self.goal.object_type.removesuffix("type")

    def _ready(self, obj: str) -> bool:
        return self.goal.modifier is None or self.goal.modifier in self.memory.treated.get(obj, set())

    def _plan(self, admissible: set[str]) -> tuple[str, str]:
        memory, goal = self.memory, self.goal
        held = memory.held
        if held is not None and display_type(held) != self._object:
            return self._put_down(held, admissible)
        if goal.lamp_type is not None:
            return self._look_in_light(held, admissible)
        target, placed = self._target()
        if held is None:
            if len(placed) >= goal.count:  # should be won already; the env disagrees
                return "look", f"The {self._what()} should be in the {target} already; I look around."
            return self._fetch(placed, self._need(placed, target), admissible)
        if not self._ready(held):
            appliance_type, verb, done = APPLIANCES[goal.modifier]
            appliance = self._first_of(appliance_type)
            if appliance is None:
                return "look", f"I see no {appliance_type} in this room to {verb} the {held}; I look around."
            return self._use(appliance, f"{verb} {held} with {appliance}", admissible,
                             f"I hold the {held}; it must be {done} first, with the {appliance}")
        if target is None:
            return "look", f"I see no {goal.receptacle_type.removesuffix('type')} in this room; I look around."
        return self._use(target, f"move {held} to {target}", admissible,
                         f"The {held} is ready; it goes in the {target}")

    def _what(self) -> str:
        word = {"isclean": "clean ", "ishot": "hot ", "iscool": "cool "}.get(self.goal.modifier, "")
        return word + self._object

    def _need(self, placed: list[str], target: str | None) -> str:
        if placed:
            return f"The {placed[0]} is in the {target}; I need one more {self._what()}"
        count = "two" if self.goal.count == 2 else "a"
        if self.goal.lamp_type is not None:
            return f"I need to hold a {self._object} under a {self.goal.lamp_type.removesuffix('type')}"
        return f"I need {count} {self._what()} for a {self.goal.receptacle_type.removesuffix('type')}"

    def _target(self) -> tuple[str | None, list[str]]:
        """The target receptacle (the one of the goal type holding most ready objects seen;
        else the first in the room listing) and the ready goal objects already in it."""
        kind = self.goal.receptacle_type.removesuffix("type")
        candidates = [r for r in self.memory.receptacles if display_type(r) == kind]
        if not candidates:
            return None, []

        def placed(receptacle: str) -> list[str]:
            return [o for o in self.memory.contents.get(receptacle, [])
                    if display_type(o) == self._object and self._ready(o)]

        best = max(sorted(candidates, key=_natural_key), key=lambda r: len(placed(r)))
        return best, placed(best)

    def _first_of(self, kind: str) -> str | None:
        here = [r for r in self.memory.receptacles if display_type(r) == kind]
        return min(here, key=_natural_key) if here else None

    def _look_in_light(self, held: str | None, admissible: set[str]) -> tuple[str, str]:
        lamp_type = self.goal.lamp_type.removesuffix("type")
        if held is None:
            return self._fetch([], self._need([], None), admissible)
        lamps = self.memory.where(lamp_type)
        if not lamps:
            return self._search(lamp_type, f"I hold the {held}; I need a {lamp_type}", admissible)
        lamp, receptacle = lamps[0]
        return self._use(receptacle, f"use {lamp}", admissible,
                         f"I hold the {held}; I switch on the {lamp} on the {receptacle} to look at it")

    def _fetch(self, exclude: list[str], why: str, admissible: set[str]) -> tuple[str, str]:
        seen = [(o, r) for o, r in self.memory.where(self._object) if o not in exclude]
        # Ready ones first (no appliance trip), then one where the agent stands.
        seen.sort(key=lambda pair: (not self._ready(pair[0]), not self.memory.at(pair[1])))
        if not seen:
            return self._search(self._object, why, admissible)
        obj, receptacle = seen[0]
        return self._use(receptacle, f"take {obj} from {receptacle}", admissible,
                         f"{why}; I saw the {obj} in the {receptacle}, so I take it")

    def _put_down(self, obj: str, admissible: set[str]) -> tuple[str, str]:
        """Free the hands (only needed when another policy took the object): here if this
        receptacle takes it, else at the next receptacle of the room listing."""
        moves = sorted(a for a in admissible if a.startswith(f"move {obj} to "))
        if moves:
            return moves[0], f"The {obj} does not help with the task; I put it down here."
        others = self.memory.receptacles
        here = others.index(self.memory.location) if self.memory.location in others else -1
        nxt = others[(here + 1) % len(others)]
        return f"go to {nxt}", f"The {obj} does not help with the task and cannot go here; I try the {nxt}."

    # -- searching ---------------------------------------------------------------------------
    def _visit_chance(self, obj_type: str, receptacle_type: str) -> tuple[float, float | None]:
        """(smoothed chance that one visit to a receptacle of this type finds the object,
        share of training games where one started there or None if never seen together)."""
        row = self.priors["objects"].get(obj_type, {}).get(receptacle_type)
        if row is None:
            return PRIOR_RATE, None
        game_hits, games, hits, instances = row
        chance = (hits + PRIOR_WEIGHT * PRIOR_RATE) / (instances + PRIOR_WEIGHT)
        return chance, game_hits / games

    def search_order(self, obj_type: str) -> list[str]:
        """Unexplored receptacles, best chance per step first (ties: by name, then number)."""
        memory = self.memory
        unexplored = [r for r in memory.receptacles if r not in memory.contents]

        def score(receptacle: str) -> float:
            kind = display_type(receptacle)
            chance, _ = self._visit_chance(obj_type, kind)
            if memory.at(receptacle):
                steps = 1.0  # "open" it, or "examine" it where it stands beside the agent
            else:  # "go to", then "open" if it turns out closed
                steps = 1.0 + self.priors["closed"].get(kind, 0.0)
            return chance / steps

        return sorted(unexplored, key=lambda r: (-score(r), _natural_key(r)))

    def _search(self, obj_type: str, why: str, admissible: set[str]) -> tuple[str, str]:
        memory = self.memory
        order = self.search_order(obj_type)
        if not order:
            return "look", f"{why}; I have looked in every receptacle and seen none, so I look around."
        receptacle = order[0]
        if memory.at(receptacle) and (receptacle in memory.closed or f"open {receptacle}" in admissible):
            return f"open {receptacle}", f"{why}; the {receptacle} is closed, so I open it to look inside."
        if memory.at(receptacle):
            return f"examine {receptacle}", f"{why}; the {receptacle} is beside me, so I look at it."
        kind = display_type(receptacle)
        _, share = self._visit_chance(obj_type, kind)
        hint = (f"a {obj_type} starts in a {kind} in {round(100 * share)}% of the {self.source} that have both"
                if share is not None else f"no {self.source} have both a {obj_type} and a {kind}")
        return f"go to {receptacle}", f"{why} and have seen none; {hint}, so I go to the {receptacle}."

    def _use(self, receptacle: str, command: str, admissible: set[str], why: str) -> tuple[str, str]:
        """Walk to `receptacle`, open it when the command needs it open, then run `command`."""
        memory = self.memory
        if not memory.at(receptacle):
            return f"go to {receptacle}", f"{why}. I go to the {receptacle}."
        needs_open = command.startswith(("take ", "move "))
        if needs_open and receptacle in memory.closed:
            return f"open {receptacle}", f"{why}. The {receptacle} is closed; I open it."
        if admissible and command not in admissible and f"open {receptacle}" in admissible:
            return f"open {receptacle}", f"{why}. I open the {receptacle} first."
        return command, f"{why}."
