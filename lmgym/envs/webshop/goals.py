"""WebShop goals: what to buy, with which options, under which price.

Two sources, as in the original (``web_agent_site/engine/goal.py``):

* ``synthetic``: for every product with an instruction in ``items_ins_v2``, one goal per
  combination of its option values (get_synthetic_goals). On the 1,000-product catalogue that
  is 415 products and 6,910 goals.
* ``human``: every crowd-sourced instruction of a product in the catalogue with at least one
  instruction attribute (get_human_goals); its options are the worker's ``instruction_options``.

The goal's price bound is one of the two larger of two values drawn from the four multiples of
$10 just above the product's price (goal.py: PRICE_RANGE, ``random.sample(price_range, 2)``);
when fewer than two exist the bound is 1,000,000 and the instruction says nothing about price.
The original draws with the unseeded global ``random``; here one ``np.random.default_rng``
with a fixed seed draws them in catalogue order, once per product (as the original does).

Goals are then shuffled with Python's ``random.Random(233)`` exactly as the original's
SimServer does (``random.seed(233); random.shuffle(goals)``), and the splits of
``baseline_models/env.py:WebEnv`` apply: test = goals 0-499, eval = 500-1499, train = the rest
(``dev`` names eval). A goal's task id (`goal_task_id`) is the sha256 of what it asks for.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from typing import Any

import numpy as np

from lmgym.envs.splits import task_id
from lmgym.envs.webshop.catalog import Catalog

#: goal.py: the price bounds a goal can get.
PRICE_RANGE = [10.0 * i for i in range(1, 100)]
#: goal.py: bound of goals without a price clause.
NO_PRICE_BOUND = 1_000_000
#: web_agent_text_env.py:SimServer: ``random.seed(233)`` before shuffling the goals.
GOAL_SHUFFLE_SEED = 233
#: Seed of the price-bound draw (the original's is unseeded).
GOAL_PRICE_SEED = 233
#: baseline_models/env.py:WebEnv: goal index ranges of the splits (``dev`` is lmgym's name for eval).
SPLITS = {"test": (0, 500), "eval": (500, 1500), "dev": (500, 1500), "train": (1500, None), "all": (0, None)}
#: The fields of a goal that say what to buy (its sampling ``weight`` depends on the whole catalogue).
GOAL_FIELDS = ("asin", "name", "query", "category", "product_category", "instruction_text", "attributes",
               "price_upper", "goal_options")
GOAL_SOURCES = ("synthetic", "human")


def price_bound(price: float, rng: np.random.Generator) -> tuple[float, str]:
    """(price_upper, instruction suffix) for a product of `price` dollars (goal.py)."""
    candidates = [p for p in PRICE_RANGE if p > price][:4]
    if len(candidates) < 2:
        return NO_PRICE_BOUND, ""
    picked = sorted(candidates[i] for i in rng.choice(len(candidates), size=2, replace=False))
    upper = picked[1]
    return upper, f", and price lower than {upper:.2f} dollars"


def synthetic_goals(catalog: Catalog, price_seed: int = GOAL_PRICE_SEED) -> list[dict[str, Any]]:
    """goal.py:get_synthetic_goals, in catalogue order, with seeded price bounds and weights."""
    rng = np.random.default_rng(price_seed)
    goals: list[dict[str, Any]] = []
    attribute_counts: dict[str, int] = defaultdict(int)
    for product in catalog.products:
        if product.get("instruction_text") is None:
            continue
        attributes = product["instruction_attributes"]
        if not attributes:
            raise ValueError(f"product {product['asin']} has an instruction but no instruction_attributes")
        price_upper, price_text = price_bound(catalog.prices[product["asin"]], rng)
        options = product["options"]
        option_names = sorted(options)
        for combination in itertools.product(*(options[name] for name in option_names)):
            goal_options = dict(zip(option_names, combination))
            option_text = ", and ".join(f"{k}: {v}" for k, v in goal_options.items())
            option_text = f" with {option_text}" if option_text else ""
            goals.append({
                "asin": product["asin"],
                "category": product["category"],
                "query": product["query"],
                "name": product["Title"],
                "product_category": product["product_category"],
                "instruction_text": f"{product['instruction_text']}{option_text}{price_text}",
                "attributes": attributes,
                "price_upper": price_upper,
                "goal_options": goal_options,
            })
            for attribute in attributes:
                attribute_counts[attribute] += 1
    # goal.py: a goal's sampling weight is the mean inverse frequency of its attributes.
    for goal in goals:
        goal["weight"] = sum(1.0 / attribute_counts[a] for a in goal["attributes"]) / len(goal["attributes"])
    return goals


def human_goals(catalog: Catalog, price_seed: int = GOAL_PRICE_SEED) -> list[dict[str, Any]]:
    """goal.py:get_human_goals over the products that carry human ``instructions``.

    Instructions without attributes are skipped (as in the original). The price bound is drawn
    per instruction, in catalogue order.
    """
    rng = np.random.default_rng(price_seed)
    goals = []
    for product in catalog.products:
        for instruction in product.get("instructions", ()):
            attributes = instruction["instruction_attributes"]
            if not attributes:
                continue
            price_upper, price_text = price_bound(catalog.prices[product["asin"]], rng)
            goals.append({
                "asin": product["asin"],
                "category": product["category"],
                "query": product["query"],
                "name": product["name"],
                "product_category": product["product_category"],
                "instruction_text": instruction["instruction"].strip(".") + price_text,
                "attributes": attributes,
                "price_upper": price_upper,
                "goal_options": list(instruction["instruction_options"]),
                "weight": 1,
            })
    return goals


def goals_for(catalog: Catalog, source: str = "synthetic") -> list[dict[str, Any]]:
    """The catalogue's goals from `source`, shuffled as the original (cached per catalogue)."""
    if source not in GOAL_SOURCES:
        raise ValueError(f"goal source must be one of {GOAL_SOURCES}, got {source!r}")

    def build():
        goals = synthetic_goals(catalog) if source == "synthetic" else human_goals(catalog)
        random.Random(GOAL_SHUFFLE_SEED).shuffle(goals)
        return goals

    return catalog.cached(f"goals:{source}", build)


def goal_task_id(goal: dict[str, Any]) -> str:
    """The task id of a goal: the sha256 of `GOAL_FIELDS` (the same goal in any catalogue that
    holds its product has one id, so a goal trained on in one catalogue is seen in another)."""
    return task_id({"family": "WebShop", **{key: goal[key] for key in GOAL_FIELDS}})


def split_range(num_goals: int, split: str) -> range:
    """Goal indices of `split` (test 0-499, eval or dev 500-1499, train the rest, all)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
    start, stop = SPLITS[split]
    stop = num_goals if stop is None else min(stop, num_goals)
    indices = range(min(start, num_goals), stop)
    if not indices:
        raise ValueError(f"split {split!r} is empty: there are only {num_goals} goals (use split='all')")
    return indices


def goal_option_choices(goal: dict[str, Any], product: dict[str, Any]) -> dict[str, str]:
    """The goal's options as {option name: value} on `product`.

    Synthetic goals already name their options; human goals list values only, so each value is
    looked up among the product's option lists (first name that offers it, in page order).
    """
    if isinstance(goal["goal_options"], dict):
        return dict(goal["goal_options"])
    choices = {}
    for value in goal["goal_options"]:
        for name, values in product["options"].items():
            if value in values and name not in choices:
                choices[name] = value
                break
    return choices
