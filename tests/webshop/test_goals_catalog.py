"""WebShop catalogue processing and goals: the original loader's and goal builder's rules."""

import random

import pytest

pytest.importorskip("bm25s", reason="WebShop search needs the webshop extra (bm25s, PyStemmer)")
from webshop_tiny_catalog import raw_products, tiny_catalog  # noqa: E402

from lmgym.data import DataNotFoundError  # noqa: E402
from lmgym.envs.webshop import catalog as C  # noqa: E402
from lmgym.envs.webshop import goals as G  # noqa: E402


# -- catalogue processing (engine.py:load_products) -----------------------------------------
def test_products_are_processed_like_the_original_loader():
    catalog = tiny_catalog()
    assert len(catalog) == 26  # the repeated asin and the "nan" asin are dropped
    mug = catalog.by_asin["B0MUG00003"]
    assert mug["Title"] == "Ceramic Coffee Mug number 3"
    assert mug["BulletPoints"] == ["Holds 13 ounces of coffee", "Dishwasher safe"]
    assert mug["options"] == {"color": ["navy blue", "red | white"], "size": ["small", "large"]}
    assert mug["option_to_image"]["navy blue"] == "navy.jpg"
    assert mug["Price"] == "$12.0" and mug["pricing"] == [12.0]
    assert mug["query"] == "coffee mugs"  # lower-cased and stripped
    assert mug["Rating"] == 4.5 and mug["Reviews"] == []
    assert mug["instruction_attributes"] == ["dishwasher safe"]
    tent = catalog.by_asin["B0TENT0001"]
    assert tent["options"] == {"style": ["dome", "tunnel"]}  # the None-valued Color is dropped
    assert tent["BulletPoints"] == ["Light tent for hiking"]  # a string becomes a one-item list
    assert tent["Price"] == "$100.0" and catalog.prices["B0TENT0001"] == 100.0  # no pricing
    assert tent["Rating"] == "N.A."
    lamp = catalog.by_asin["B0ODD00001"]
    assert lamp["Attributes"] == ["DUMMY_ATTR"] and lamp["MainImage"] == ""


def test_ranged_prices_are_seeded_draws_within_the_range():
    first, second = tiny_catalog(), tiny_catalog()
    mug0 = first.by_asin["B0MUG00000"]
    assert mug0["Price"] == "$10.0 to $14.0" and mug0["pricing"] == [10.0, 14.0]
    assert 10.0 <= first.prices["B0MUG00000"] <= 14.0
    assert first.prices == second.prices  # same seed, same prices
    other = C.process_products(raw_products(), {}, price_seed=1)
    assert other.prices["B0MUG00000"] != first.prices["B0MUG00000"]


@pytest.mark.parametrize("pricing, expected", [
    ("$19.99", ([19.99], "$19.99")),
    ("$1,299.00", ([1299.0], "$1299.0")),
    ("$19.99 - $27.99", ([19.99, 27.99], "$19.99 to $27.99")),
    ("", ([100.0], "$100.0")),
    (None, ([100.0], "$100.0")),
])
def test_parse_pricing(pricing, expected):
    assert C.parse_pricing(pricing) == expected


def test_missing_data_names_the_variable_and_layout(monkeypatch, tmp_path):
    monkeypatch.setenv("LMGYM_DATA", str(tmp_path))
    monkeypatch.delenv("WEBSHOP_DATA", raising=False)
    with pytest.raises(DataNotFoundError, match="LMGYM_DATA") as error:
        C.data_dir()
    assert C.ITEMS_FILE in str(error.value) and "princeton-nlp/WebShop" in str(error.value)


# -- goals (goal.py) -------------------------------------------------------------------------
def test_synthetic_goals_cover_every_option_combination():
    goals = G.synthetic_goals(tiny_catalog())
    mug_goals = [g for g in goals if g["asin"] == "B0MUG00003"]
    assert len(goals) == 6 and len(mug_goals) == 4
    goal = mug_goals[0]
    assert goal["goal_options"] == {"color": "navy blue", "size": "small"}
    upper = goal["price_upper"]
    assert goal["instruction_text"] == ("i want a dishwasher safe ceramic coffee mug with color: navy blue, "
                                        f"and size: small, and price lower than {upper:.2f} dollars")
    # goal.py: two of the four multiples of $10 above the price; the bound is the larger one.
    assert upper in (20.0, 30.0, 40.0, 50.0)
    assert len({g["price_upper"] for g in mug_goals}) == 1  # one draw per product
    assert goal["name"] == "Ceramic Coffee Mug number 3" and goal["query"] == "coffee mugs"
    # weight: mean inverse frequency of the goal's attributes ("dishwasher safe" in 4 goals)
    assert goal["weight"] == pytest.approx(1 / 4)


def test_price_bound_rules():
    import numpy as np
    rng = np.random.default_rng(0)
    bounds = {G.price_bound(12.0, rng)[0] for _ in range(200)}
    assert bounds == {30.0, 40.0, 50.0}  # the larger of two draws from {20, 30, 40, 50}
    assert G.price_bound(985.0, rng) == (G.NO_PRICE_BOUND, "")  # fewer than two multiples above


def test_human_goals_skip_instructions_without_attributes():
    goals = G.human_goals(tiny_catalog())
    assert len(goals) == 1
    assert goals[0]["instruction_text"].startswith("find a dome tent that is waterproof, and price lower than")
    assert goals[0]["goal_options"] == ["dome"]
    product = tiny_catalog().by_asin["B0TENT0001"]
    assert G.goal_option_choices(goals[0], product) == {"style": "dome"}


def test_goals_are_shuffled_as_the_original_and_cached():
    catalog = tiny_catalog()
    expected = G.synthetic_goals(catalog)
    random.seed(233)  # web_agent_text_env.py:SimServer
    random.shuffle(expected)
    assert G.goals_for(catalog) == expected
    assert G.goals_for(catalog) is G.goals_for(catalog)
    with pytest.raises(ValueError, match="goal source"):
        G.goals_for(catalog, "crowd")


def test_splits():
    assert G.split_range(6910, "test") == range(0, 500)
    assert G.split_range(6910, "eval") == range(500, 1500)
    assert G.split_range(6910, "train") == range(1500, 6910)
    assert G.split_range(6, "all") == range(0, 6)
    with pytest.raises(ValueError, match="empty"):
        G.split_range(6, "eval")
    with pytest.raises(ValueError, match="split must be"):
        G.split_range(6, "validation")
    assert G.split_range(6910, "dev") == G.split_range(6910, "eval")  # lmgym's name for eval


def test_official_catalogue_goal_counts():
    try:
        catalog = C.load_catalog()
    except DataNotFoundError as error:
        pytest.skip(f"no WebShop data: {error}")
    assert len(catalog) == 1000
    assert sum(p["instruction_text"] is not None for p in catalog.products) == 415
    goals = G.goals_for(catalog)
    assert len(goals) == 6910
    assert [len(G.split_range(len(goals), s)) for s in ("test", "eval", "train")] == [500, 1000, 5410]
    assert len(G.goals_for(catalog, "human")) == 13
    assert C.load_catalog() is catalog  # cached per process
