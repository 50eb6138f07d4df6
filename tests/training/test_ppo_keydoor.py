"""MaskablePPO through the SB3 wrappers: it learns KeyDoor, is reproducible, and plays in the runner."""

import csv

import pytest
import torch

pytest.importorskip("sb3_contrib")

from lmgym.agents.ppo_agent import PPOAgent  # noqa: E402
from lmgym.io import read_jsonl  # noqa: E402
from lmgym.models.checkpoints import read_meta  # noqa: E402
from lmgym.benchmarks.runner import read_rows, run_benchmark  # noqa: E402
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec  # noqa: E402
from lmgym.envs.sb3_wrappers import TokenEncoder  # noqa: E402
from lmgym.components.sb3 import TextFeaturesExtractor, masked_mean, task_word_flags  # noqa: E402
from lmgym.training.ppo import PPOConfig, main, train  # noqa: E402


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """KeyDoor-v0 trained for 8k steps (about 15 s on an idle core)."""
    out = tmp_path_factory.mktemp("ppo")
    result = train(PPOConfig(steps=8_000, out=str(out), quiet=True, eval_episodes=50, checkpoint_every=4_000))
    return out, result


def test_maskable_ppo_learns_keydoor(trained):
    out, result = trained
    # Measured at 8k steps on eval seeds 10000..10049, the agents' streams independent of the
    # env's (agent_seed): ppo 0.86 (this fixture: seed 0, the env's 9 slots), 0.94 (seed 1),
    # 0.94 / 0.90 with 16 slots (seeds 0 / 1); random 0.20 in all four. The same seed trains
    # differently on another CPU (torch's kernels round differently): 0.78 on a Xeon with AMX
    # (2026-12-07), so the bound is below the Wilson interval of 43/50 ([0.74, 0.93]), not at 0.8.
    assert result["success"]["ppo"] >= 0.7
    assert result["success"]["ppo"] >= result["success"]["random"] + 0.5


def test_training_writes_metrics_curve_and_checkpoints(trained):
    out, _ = trained
    header = (out / "progress.csv").read_text().splitlines()[0].split(",")
    assert {"rollout/ep_rew_mean", "train/policy_gradient_loss", "train/entropy_loss", "time/fps"} <= set(header)
    with open(out / "learning_curve.csv") as f:
        curve = list(csv.DictReader(f))
    assert len(curve) > 100 and {"timestep", "return", "length", "won"} == set(curve[0])
    late = [row["won"] == "True" for row in curve[-100:]]
    early = [row["won"] == "True" for row in curve[:100]]
    assert sum(late) > sum(early)  # the curve goes up
    assert (out / "learning_curve.png").stat().st_size > 0
    # the shared loop's log: a row per update, env steps as train/step (whole rollouts of 4 x 128)
    rows = list(read_jsonl(out / "metrics.jsonl"))
    assert [r["train/step"] for r in rows] == list(range(512, 8192 + 1, 512))
    assert {"train/loss", "train/entropy_loss", "rollout/success_rate", "time/seconds"} <= set(rows[-1])
    assert rows[-1]["rollout/success_rate"] > rows[0]["rollout/success_rate"]
    assert read_meta(out / "checkpoint")["step"] == 8192 and (out / "checkpoint" / "model.zip").exists()
    # the tasks of its training episodes, beside model.zip too (what the benchmark runner checks)
    [panel] = read_meta(out)["train_panels"]
    assert panel["split"] == "train" and panel["seeds"] is None and panel["n"] == len(panel["task_ids"]) >= 100
    assert read_meta(out / "checkpoint")["train_panels"] == [panel]


def test_trained_policy_plays_in_the_benchmark_runner(trained, tmp_path):
    out, _ = trained
    spec = BenchmarkSpec("ppo", (EnvSpec("lmgym/KeyDoor-v0"),),
                         (AgentSpec("ppo", kwargs={"path": str(out / "model.zip")}), AgentSpec("random")), episodes=10)
    summary = run_benchmark(spec, tmp_path / "a", quiet=True, plots=False)
    rates = {c["agent"]: c["success_rate"] for c in summary["cells"]}
    assert rates["ppo"] >= 0.7 and rates["ppo"] >= rates["random"] + 0.2  # measured 0.8 vs 0.5 on seeds 0-9
    run_benchmark(spec, tmp_path / "b", quiet=True, plots=False)  # sampling uses the agent's seeded rng
    strip = lambda rows: sorted((r["key"], r["return"], r["steps"]) for r in rows)  # noqa: E731
    assert strip(read_rows(tmp_path / "a")) == strip(read_rows(tmp_path / "b"))
    agent = PPOAgent(str(out / "checkpoint" / "model.zip"))  # finds encoder.json one folder up
    assert agent.encoder.max_actions == 9  # KeyDoor-v0's max_admissible_actions, the trainer's default


def test_same_seed_gives_identical_parameters(tmp_path):
    def parameters(folder):
        config = PPOConfig(steps=256, n_steps=64, batch_size=64, num_envs=2, out=str(tmp_path / folder), quiet=True,
                           eval_episodes=0, checkpoint_every=0)
        train(config)
        from sb3_contrib import MaskablePPO

        return MaskablePPO.load(tmp_path / folder / "model.zip").policy.state_dict()

    first, second = parameters("a"), parameters("b")
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_a_finished_run_given_more_steps_resumes_from_its_checkpoint(tmp_path):
    from sb3_contrib import MaskablePPO

    options = dict(n_steps=64, batch_size=64, num_envs=2, out=str(tmp_path), quiet=True, eval_episodes=0, checkpoint_every=0)
    train(PPOConfig(steps=256, **options))
    first = MaskablePPO.load(tmp_path / "model.zip").policy.state_dict()
    seconds = read_meta(tmp_path / "checkpoint")["train_seconds"]
    train(PPOConfig(steps=512, **options))
    assert [r["train/step"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [128, 256, 384, 512]  # rollouts of 2 x 64
    meta = read_meta(tmp_path / "checkpoint")
    assert meta["step"] == 512 and meta["train_seconds"] > seconds
    assert (tmp_path / "progress-until-256.csv").exists()  # SB3's own log of the first attempt, kept
    second = MaskablePPO.load(tmp_path / "model.zip").policy.state_dict()
    assert any(not torch.equal(first[k], second[k]) for k in first)


def test_init_from_starts_where_the_earlier_run_ended(trained, tmp_path):
    """A curriculum stage: with a zero learning rate the next run keeps the loaded policy exactly."""
    from sb3_contrib import MaskablePPO

    out, _ = trained
    train(PPOConfig(steps=256, n_steps=64, num_envs=2, learning_rate=0.0, init_from=str(out / "model.zip"),
                    out=str(tmp_path), quiet=True, eval_episodes=0, checkpoint_every=0))
    before = MaskablePPO.load(out / "model.zip").policy.state_dict()
    after = MaskablePPO.load(tmp_path / "model.zip").policy.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_task_word_flags_mark_the_action_words_the_task_names():
    encoder = TokenEncoder(max_tokens=8, max_actions=3, action_tokens=6, vocab_size=4096)
    info = {"task": "put some apple on table.",
            "admissible_actions": ["go to table 1", "take apple 2 from shelf 1", "take mug 1 from shelf 1"]}
    obs = {k: torch.as_tensor(v).unsqueeze(0) for k, v in encoder.encode("You see an apple", info).items()}
    flags = task_word_flags(obs["actions"], obs["task"])  # (1, 3, 6)
    assert flags[0].tolist() == [[0, 0, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]]
    assert task_word_flags(obs["observation"], obs["task"])[0].tolist() == [0, 0, 0, 1, 0, 0, 0, 0]  # pads: 0


def test_features_extractor_ignores_padding():
    encoder = TokenEncoder(max_tokens=8, max_actions=3, action_tokens=4, vocab_size=64)
    extractor = TextFeaturesExtractor(encoder.observation_space, embed_dim=8, hidden=16)
    info = {"task": "find key", "admissible_actions": ["go north", "look"]}
    obs = {k: torch.as_tensor(v).unsqueeze(0).float() for k, v in encoder.encode("You see a key.", info).items()}
    features = extractor(obs)
    assert features.shape == (1, 16 + 3)
    ids = torch.tensor([[3, 5, 0, 0]])
    embedded = torch.randn(1, 4, 2)
    assert torch.allclose(masked_mean(embedded, ids), embedded[:, :2].mean(1))


def test_cli_help_lists_the_config(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "lmgym train ppo" in text and "ENV_ID" in text
    assert "--steps" in text and "total environment steps of training" in text
