"""studies/alfworld_gen.py on a tiny budget: its pieces give sound numbers and the log resumes."""

import pytest

pytest.importorskip("alfworld", reason="the generator reads the alfworld wheel")

from lmgym.envs.alfworld.gen.generator import generate_game  # noqa: E402
from lmgym.io import read_jsonl  # noqa: E402


@pytest.fixture(scope="module")
def bench(load_study):
    return load_study("alfworld_gen")


def test_speed_expert_and_knob_table(bench):
    games, speed = bench.generation_speed(range(10))
    assert len(games) == 10 and speed["games_per_second"] > 0 and speed["native_resets_per_second"] > 0
    expert = bench.expert_batch(games)
    assert expert["expert_wins"] == 10 and not expert["failures"] and 1 <= expert["mean_walkthrough"] <= 50
    rows = bench.knob_table(games_per_row=2)
    assert [r["knobs"] for r in rows] == [label for label, _ in bench.KNOB_ROWS]
    assert all(r["expert_success"] == 1.0 and 0.0 <= r["random_success"] <= 1.0 for r in rows)
    assert "| knobs |" in bench.knob_markdown(rows)


def test_engines_batch_logs_and_resumes(bench, tmp_path):
    pytest.importorskip("fast_downward", reason="the official engine needs textworld[pddl]")
    log = tmp_path / "official.jsonl"
    games = [generate_game(0, bench.SMALL_ROOMS)]
    first = bench.engines_batch(games, log=str(log))
    assert first["agree"] == 1 and first["official_s_per_game"] > 0
    second = bench.engines_batch(games, log=str(log))  # read back from the log, not re-run
    assert second == first and len(list(read_jsonl(log))) == 1
