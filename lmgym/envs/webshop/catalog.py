"""WebShop's product catalogue: the official raw layout, processed as the original loader does.

The raw layout is WebShop's ``items_shuffle_*.json`` (a list of products with asin, name,
full_description, small_description, pricing, images, customization_options, category, query,
product_category) plus ``items_ins_v2_*.json`` (per asin: attributes and, for some products, a
synthetic instruction with instruction_attributes). `process_products` turns them into the
processed dicts the original's pages, search index and reward read, following
``web_agent_site/engine/engine.py:load_products`` rule by rule (cited inline).

Differences from the original, on purpose:

* Ranged prices ("$x - $y") get one price per catalogue drawn from a seeded generator; the
  original draws them with the unseeded global ``random`` (engine.py:generate_product_prices).
* Reviews come from an optional ``reviews.json`` beside the items (the original's
  DEFAULT_REVIEW_PATH); without it products have no reviews and the rating falls back to the
  raw ``average_rating`` field, then to ``"N.A."`` as in the original.

`load_catalog` reads the real files through ``LMGYM_DATA`` and caches the result per process.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from lmgym.data import find_data

ITEMS_FILE = "items_shuffle_1000.json"
ATTRIBUTES_FILE = "items_ins_v2_1000.json"
#: Optional files: human instructions per asin (the original's items_human_ins.json layout) and reviews.
HUMAN_INSTRUCTIONS_FILES = ("items_human_ins.json", "items_human_ins_subset13_reconstructed.json")
REVIEWS_FILE = "reviews.json"

DATA_LAYOUT = f"""  webshop/
    {ITEMS_FILE}   raw products (asin, name, full_description, small_description, pricing, ...)
    {ATTRIBUTES_FILE}    per asin: attributes, instruction, instruction_attributes
    {HUMAN_INSTRUCTIONS_FILES[0]}      optional: human instructions per asin (or {HUMAN_INSTRUCTIONS_FILES[1]})
    {REVIEWS_FILE}              optional: reviews and average ratings per asin"""
DATA_SOURCE = ("princeton-nlp/WebShop setup.sh (Google Drive: items_shuffle_1000.json, items_ins_v2_1000.json, "
               "items_human_ins.json), MIT licence")

#: Price given to products without pricing (engine.py:load_products).
DEFAULT_PRICE = 100.0
#: Seed of the per-catalogue draw of ranged prices (the original's draw is unseeded).
PRICE_SEED = 233


@dataclass
class Catalog:
    """Processed products, indexed by asin, with the one price per product the reward sees.

    Attributes:
        products: processed product dicts in catalogue order (the original's ``all_products``).
        by_asin: asin -> product (the original's ``product_item_dict``).
        prices: asin -> price in dollars (``product_prices``): the single price, or a seeded
            uniform draw between the two ends of a ranged price.
        name: a label for logs and cache keys (the data folder, or a generator's spec).
    """

    products: list[dict[str, Any]] = field(repr=False)
    by_asin: dict[str, dict[str, Any]] = field(repr=False)
    prices: dict[str, float] = field(repr=False)
    name: str = "catalog"
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.products)

    def cached(self, key: str, build):
        """Per-catalogue memo for things derived from it (the search index, goal lists)."""
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]


def parse_pricing(pricing: Any) -> tuple[list[float], str]:
    """``"$12.99"`` -> ([12.99], "$12.99"); ``"$1.00 - $2.50"`` -> ([1.0, 2.5], "$1.0 to $2.5").

    engine.py:load_products: every "$"-separated piece keeps only digits and dots, is read
    through Decimal, and at most the first two are kept; no pricing means $100.0.
    """
    if not pricing:
        return [DEFAULT_PRICE], f"${DEFAULT_PRICE}"
    if isinstance(pricing, list):  # already processed (a catalogue written back out)
        values = [float(p) for p in pricing]
    else:
        values = [float(Decimal(re.sub(r"[^\d.]", "", piece))) for piece in str(pricing).split("$")[1:]]
    if not values:
        return [DEFAULT_PRICE], f"${DEFAULT_PRICE}"
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def parse_options(customization_options: Any) -> tuple[dict[str, list[str]], dict[str, str | None]]:
    """Option name -> values, and value -> image (engine.py:load_products).

    Names are lowercased; values are stripped, lowercased, and "/" becomes " | ". Options whose
    contents are None are dropped.
    """
    options: dict[str, list[str]] = {}
    option_to_image: dict[str, str | None] = {}
    if not customization_options:
        return options, option_to_image
    for option_name, contents in customization_options.items():
        if contents is None:
            continue
        values = []
        for content in contents:
            value = content["value"].strip().replace("/", " | ").lower()
            values.append(value)
            option_to_image[value] = content.get("image")
        options[option_name.lower()] = values
    return options, option_to_image


def process_products(
    raw_products: list[dict[str, Any]],
    attributes: dict[str, dict[str, Any]],
    *,
    human_instructions: dict[str, list[dict[str, Any]]] | None = None,
    reviews: list[dict[str, Any]] | None = None,
    price_seed: int = PRICE_SEED,
    name: str = "catalog",
) -> Catalog:
    """Process raw products as ``engine.py:load_products`` does and draw their prices.

    Args:
        raw_products: the raw layout (``items_shuffle_*.json``), in catalogue order.
        attributes: ``items_ins_v2_*.json``: asin -> {attributes, instruction, instruction_attributes}.
        human_instructions: asin -> list of {instruction, instruction_attributes,
            instruction_options} (``items_human_ins.json``); stored as ``product["instructions"]``.
        reviews: the original's ``reviews.json`` list of {asin, reviews, average_rating}.
        price_seed: seed of the draw of ranged prices.
        name: the catalogue's label.
    """
    all_reviews = {r["asin"]: r.get("reviews", []) for r in reviews or []}
    all_ratings = {r["asin"]: r.get("average_rating", "N.A.") for r in reviews or []}
    human_instructions = human_instructions or {}
    products: list[dict[str, Any]] = []
    seen: set[str] = set()
    for raw in raw_products:
        asin = raw["asin"]
        # engine.py: skip "nan" and over-long asins, keep the first of duplicates.
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        product = dict(raw)
        product["Title"] = raw["name"]
        product["Description"] = raw["full_description"]
        product["Reviews"] = [_review(r) for r in all_reviews.get(asin, [])]
        product["Rating"] = all_ratings.get(asin) or raw.get("average_rating") or "N.A."
        bullets = raw["small_description"]
        product["BulletPoints"] = bullets if isinstance(bullets, list) else [bullets]
        product["pricing"], product["Price"] = parse_pricing(raw.get("pricing"))
        product["options"], product["option_to_image"] = parse_options(raw.get("customization_options"))
        item_attributes = attributes.get(asin, {})
        # engine.py: "without color, size, price, availability"; DUMMY_ATTR when absent.
        product["Attributes"] = item_attributes.get("attributes", ["DUMMY_ATTR"])
        product["instruction_text"] = item_attributes.get("instruction")
        product["instruction_attributes"] = item_attributes.get("instruction_attributes")
        if asin in human_instructions:
            product["instructions"] = human_instructions[asin]
        images = raw.get("images") or [""]
        product["MainImage"] = images[0]
        product["query"] = raw["query"].lower().strip()
        products.append(product)
    return Catalog(
        products=products,
        by_asin={p["asin"]: p for p in products},
        prices=draw_prices(products, price_seed),
        name=name,
    )


def draw_prices(products: list[dict[str, Any]], seed: int) -> dict[str, float]:
    """The price of each product (engine.py:generate_product_prices), with a seeded draw.

    One price: that price. A range: uniform between its ends, drawn in catalogue order from
    ``np.random.default_rng(seed)`` so every process sees the same prices.
    """
    rng = np.random.default_rng(seed)
    prices = {}
    for product in products:
        pricing = product["pricing"]
        if len(pricing) == 1:
            prices[product["asin"]] = float(pricing[0])
        else:
            # Python's random.uniform(a, b) = a + (b - a) * U, which also takes ranges written high-low.
            low, high = pricing[0], pricing[1]
            prices[product["asin"]] = float(low + (high - low) * rng.random())
    return prices


def _review(review: dict[str, Any]) -> dict[str, Any]:
    """engine.py: reviews carry ``score`` (from ``stars``) and ``body`` (from ``review``)."""
    review = dict(review)
    if "score" not in review:
        review["score"] = review.pop("stars", 0)
    review["body"] = review.pop("review", "") if "body" not in review else review["body"]
    return review


def data_dir() -> Path:
    """The webshop folder under ``LMGYM_DATA`` (or ``WEBSHOP_DATA``), checked for the two item files."""
    return find_data(
        "webshop", required=[ITEMS_FILE, ATTRIBUTES_FILE], optional=[*HUMAN_INSTRUCTIONS_FILES, REVIEWS_FILE],
        layout=DATA_LAYOUT, source=DATA_SOURCE, env_var="WEBSHOP_DATA",
    )


@lru_cache(maxsize=4)
def _load_catalog_cached(folder: str) -> Catalog:
    path = Path(folder)
    raw_products = json.loads((path / ITEMS_FILE).read_text())
    attributes = json.loads((path / ATTRIBUTES_FILE).read_text())
    human = {}
    for filename in HUMAN_INSTRUCTIONS_FILES:
        if (path / filename).is_file():
            human = json.loads((path / filename).read_text())
            break
    reviews = json.loads((path / REVIEWS_FILE).read_text()) if (path / REVIEWS_FILE).is_file() else None
    return process_products(raw_products, attributes, human_instructions=human, reviews=reviews,
                            name=f"webshop:{path}")


def load_catalog(folder: str | Path | None = None) -> Catalog:
    """The official catalogue from `folder` (default: `data_dir()`), processed once per process."""
    return _load_catalog_cached(str(Path(folder) if folder is not None else data_dir()))
