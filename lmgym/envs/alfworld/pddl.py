"""Read ALFWorld's PDDL problems and evaluate their goals, in pure Python.

A ``game.tw-pddl`` file is JSON whose ``pddl_problem`` is a PDDL problem over the ALFRED
domain (``alfred.pddl``). This module turns it into a `Problem`: typed objects, the initial
facts and the goal formula. Names are lower-cased, as Fast Downward's PDDL reader does (the
official engine, TextWorld's ``PddlEnv``, reads the problem through Fast Downward's translator,
so every id it shows or sorts is lower-case).

Facts are tuples ``(predicate, arg, ...)``; a state maps each predicate to a set of argument
tuples. `goal_holds` decides a goal formula (``and``, ``or``, ``not``, ``exists``, ``forall``,
``=``, atoms) in such a state by backtracking over the facts, binding variables from atoms
first, the way a conjunctive query is answered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator

Fact = tuple[str, ...]
#: A state: predicate -> the set of its true argument tuples.
Facts = dict[str, set[tuple[str, ...]]]

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse_sexpr(text: str) -> list[Any]:
    """Parse PDDL text (``;`` comments allowed) into nested lists of lower-case tokens."""
    text = re.sub(r";[^\n]*", "", text).lower()
    stack: list[list[Any]] = [[]]
    for token in _TOKEN.findall(text):
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) == 1:
                raise ValueError("unbalanced ')' in PDDL text")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token)
    if len(stack) != 1:
        raise ValueError("unbalanced '(' in PDDL text")
    return stack[0]


def _typed_names(tokens: list[str]) -> list[tuple[str, str]]:
    """``a b - t1 c - t2`` -> [(a, t1), (b, t1), (c, t2)] (untyped names get ``object``)."""
    result, pending = [], []
    i = 0
    while i < len(tokens):
        if tokens[i] == "-":
            kind = tokens[i + 1]
            result += [(name, kind) for name in pending]
            pending = []
            i += 2
        else:
            pending.append(tokens[i].rstrip(","))
            i += 1
    return result + [(name, "object") for name in pending]


@dataclass(frozen=True)
class Problem:
    name: str
    #: object id -> declared type, for every object of ``:objects``.
    types: dict[str, str]
    #: The initial facts, in file order (numeric fluents such as ``distance`` left out).
    init: list[Fact]
    #: The goal formula as nested lists (`parse_sexpr` output).
    goal: Any
    objects_by_type: dict[str, list[str]] = field(default_factory=dict)


def parse_problem(text: str) -> Problem:
    """Parse a PDDL problem (``define (problem ...) (:domain ...) (:objects ...) (:init ...) (:goal ...)``)."""
    forms = parse_sexpr(text)
    define = next((f for f in forms if isinstance(f, list) and f and f[0] == "define"), None)
    if define is None:
        raise ValueError("no (define (problem ...)) form in the PDDL problem")
    name, types, init, goal = "", {}, [], ["and"]
    for part in define[1:]:
        head = part[0]
        if head == "problem":
            name = part[1]
        elif head == ":objects":
            types = dict(_typed_names(part[1:]))
        elif head == ":init":
            # Fluent assignments like (= (distance a b) 3) are numeric, not facts.
            init = [tuple(atom) for atom in part[1:] if atom and atom[0] != "=" and all(isinstance(a, str) for a in atom)]
        elif head == ":goal":
            goal = part[1]
    by_type: dict[str, list[str]] = {}
    for obj, kind in sorted(types.items()):
        by_type.setdefault(kind, []).append(obj)
    return Problem(name, types, init, goal, by_type)


# -- goal evaluation -----------------------------------------------------------------------
class ConjunctiveGoal:
    """A goal of nested ``exists``/``and`` over atoms, ``=`` and negations, compiled once.

    Every ALFWorld goal has this shape. The quantified variables become the variables of one
    conjunctive query; `holds` answers it by joining the literals in an order fixed at compile
    time (most bound arguments first, tests as soon as their variables are bound).
    """

    def __init__(self, goal: Any, problem: Problem, static_facts: Facts | None = None):
        self.problem = problem
        self.literals: list[Any] = []
        self.var_types: dict[str, str] = {}
        self._flatten(goal, {})
        self.plan = self._order()
        # Facts that never change, indexed by (argument position, value): a join step over a
        # static predicate with a bound argument reads only the matching facts.
        self.static_index: dict[str, dict[tuple[int, str], list[tuple[str, ...]]]] = {}
        for pred, tuples in (static_facts or {}).items():
            index: dict[tuple[int, str], list[tuple[str, ...]]] = {}
            for args in sorted(tuples):
                for position, value in enumerate(args):
                    index.setdefault((position, value), []).append(args)
            self.static_index[pred] = index

    @staticmethod
    def supports(goal: Any) -> bool:
        """Whether `goal` has the nested exists/and shape (`__init__` may still refuse it)."""
        if isinstance(goal, str):
            return False
        head = goal[0]
        if head == "and":
            return all(ConjunctiveGoal.supports(part) for part in goal[1:])
        if head == "exists":
            return ConjunctiveGoal.supports(goal[2])
        if head == "not":
            return isinstance(goal[1], list) and all(isinstance(a, str) for a in goal[1])
        return all(isinstance(a, str) for a in goal)

    def _flatten(self, formula: Any, names: dict[str, str]) -> None:
        head = formula[0]
        if head == "and":
            for part in formula[1:]:
                self._flatten(part, names)
        elif head == "exists":
            inner = dict(names)
            for name, kind in _typed_names(_flatten_params(formula[1])):
                inner[name] = f"{name}#{len(self.var_types)}"
                self.var_types[inner[name]] = kind
            self._flatten(formula[2], inner)
        else:
            self.literals.append(_rename(formula, names))

    def _order(self) -> list[Any]:
        remaining, bound, plan = list(self.literals), set(), []

        def variables(literal: Any) -> set[str]:
            return set(_free_vars(literal, {}))

        while remaining:
            tests = [l for l in remaining if l[0] in ("not", "=") and variables(l) <= bound]
            if tests:
                chosen = tests[0]
            else:
                atoms = [l for l in remaining if l[0] not in ("not", "=")]
                if not atoms:
                    raise ValueError("a negation or equality has variables no atom binds")
                # Most constants or bound variables first; then fewer free variables.
                chosen = max(atoms, key=lambda l: (sum(not _is_var(t) or t in bound for t in l[1:]),
                                                   -len(variables(l) - bound)))
            remaining.remove(chosen)
            plan.append(chosen)
            bound |= variables(chosen)
        return plan

    def holds(self, facts: Facts) -> bool:
        return self._join(0, {}, facts)

    def _join(self, index: int, binding: dict[str, str], facts: Facts) -> bool:
        if index == len(self.plan):
            return True
        literal = self.plan[index]
        head = literal[0]
        if head == "=":
            return _value(literal[1], binding) == _value(literal[2], binding) and self._join(index + 1, binding, facts)
        if head == "not":
            inner = literal[1]
            args = tuple(_value(t, binding) for t in inner[1:])
            if inner[0] == "=":
                return args[0] != args[1] and self._join(index + 1, binding, facts)
            return args not in facts.get(inner[0], ()) and self._join(index + 1, binding, facts)
        args = [_value(t, binding) for t in literal[1:]]
        if None not in args:
            return tuple(args) in facts.get(head, ()) and self._join(index + 1, binding, facts)
        types = self.problem.types
        candidates = facts.get(head, ())
        static = self.static_index.get(head)
        if static is not None:
            position = next((i for i, want in enumerate(args) if want is not None), None)
            if position is not None:
                candidates = static.get((position, args[position]), ())
        for candidate in candidates:
            extended = binding
            for term, want, value in zip(literal[1:], args, candidate):
                if want is None:
                    kind = self.var_types.get(term, "object")
                    if extended.get(term, value) != value or (kind != "object" and types.get(value) != kind):
                        break
                    if extended is binding:
                        extended = dict(binding)
                    extended[term] = value
                elif want != value:
                    break
            else:
                if self._join(index + 1, extended, facts):
                    return True
        return False


def goal_holds(goal: Any, facts: Facts, problem: Problem) -> bool:
    """Whether `goal` holds in `facts` (closed world: absent facts are false); any PDDL goal.
    `ConjunctiveGoal` is the fast path for the usual shape."""
    return next(_satisfy([goal], {}, facts, problem), None) is not None


def _is_var(term: str) -> bool:
    return term.startswith("?")


def _bound(formula: Any, binding: dict[str, str]) -> bool:
    """Whether every variable that occurs free in `formula` is bound (conservative)."""
    if isinstance(formula, str):
        return not _is_var(formula) or formula in binding
    if formula and formula[0] in ("exists", "forall"):
        local = {name for name, _ in _typed_names(_flatten_params(formula[1]))}
        inner = {**binding, **{v: "" for v in local}}
        return _bound(formula[2], inner)
    return all(_bound(part, binding) for part in formula[1:])


def _flatten_params(params: Any) -> list[str]:
    return [p for p in params if isinstance(p, str)]


def _satisfy(goals: list[Any], binding: dict[str, str], facts: Facts, problem: Problem) -> Iterator[dict[str, str]]:
    """Yield bindings under which every formula in `goals` holds (depth-first)."""
    if not goals:
        yield binding
        return
    # Atoms that can bind variables go first; tests that need bound variables wait.
    for index, formula in enumerate(goals):
        if formula[0] not in ("not", "=", "or", "forall", "imply") or _bound(formula, binding):
            break
    else:
        # Only tests with unbound variables left: enumerate one variable over its objects.
        variable = next(_free_vars(goals[0], binding))
        for value in problem.types:
            yield from _satisfy(goals, {**binding, variable: value}, facts, problem)
        return
    formula, rest = goals[index], goals[:index] + goals[index + 1:]
    head = formula[0]
    if head == "and":
        yield from _satisfy(list(formula[1:]) + rest, binding, facts, problem)
    elif head == "exists":
        params = _typed_names(_flatten_params(formula[1]))
        # Rename the quantified variables so nested quantifiers cannot capture each other.
        suffix = f"#{len(binding)}#{id(formula)}"
        renamed = _rename(formula[2], {name: name + suffix for name, _ in params})
        typed = [["__type__", name + suffix, kind] for name, kind in params]
        yield from _satisfy([renamed] + typed + rest, binding, facts, problem)
    elif head == "__type__":
        variable, kind = formula[1], formula[2]
        value = binding.get(variable)
        if value is None:
            for candidate in problem.objects_by_type.get(kind, ()):
                yield from _satisfy(rest, {**binding, variable: candidate}, facts, problem)
        elif problem.types.get(value) == kind:
            yield from _satisfy(rest, binding, facts, problem)
    elif head == "forall":
        # forall x. F  ==  not exists x. not F
        counter = ["exists", formula[1], ["not", formula[2]]]
        if not goal_holds(_rename(counter, binding), facts, problem):
            yield from _satisfy(rest, binding, facts, problem)
    elif head == "not":
        if next(_satisfy([formula[1]], binding, facts, problem), None) is None:
            yield from _satisfy(rest, binding, facts, problem)
    elif head == "or":
        for option in formula[1:]:
            for result in _satisfy([option], binding, facts, problem):
                yield from _satisfy(rest, result, facts, problem)
    elif head == "imply":
        yield from _satisfy([["or", ["not", formula[1]], formula[2]]] + rest, binding, facts, problem)
    elif head == "=":
        if _value(formula[1], binding) == _value(formula[2], binding):
            yield from _satisfy(rest, binding, facts, problem)
    else:
        args = [_value(term, binding) for term in formula[1:]]
        if all(a is not None for a in args):
            if tuple(args) in facts.get(head, ()):
                yield from _satisfy(rest, binding, facts, problem)
            return
        for candidate in sorted(facts.get(head, ())):
            extended = dict(binding)
            for term, value in zip(formula[1:], candidate):
                if _is_var(term):
                    if extended.setdefault(term, value) != value:
                        break
                elif term != value:
                    break
            else:
                yield from _satisfy(rest, extended, facts, problem)


def _value(term: str, binding: dict[str, str]) -> str | None:
    return binding.get(term) if _is_var(term) else term


def _free_vars(formula: Any, binding: dict[str, str]) -> Iterator[str]:
    if isinstance(formula, str):
        if _is_var(formula) and formula not in binding:
            yield formula
        return
    for part in formula[1:]:
        yield from _free_vars(part, binding)


def _rename(formula: Any, names: dict[str, str]) -> Any:
    if isinstance(formula, str):
        return names.get(formula, formula)
    return [_rename(part, names) for part in formula]
