"""lmgym train grpo: the advantages and the PPO-clip loss equal TRL's on the same numbers (TRL's
own trainer code, not a copy), GiGPO's step groups, reproducibility, and that it learns KeyDoor."""

import importlib.util
import json
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from lmgym.errors import InputError
from lmgym.rollouts import Episode, Step
from lmgym.training.agent_rollouts import PlayedEpisode, TurnTokens, turns_of
from lmgym.training.grpo import (GRPOConfig, Sample, advantages, collate, completion_logprobs, discounted_returns,
                                 flat_groups, group_returns, grpo_advantages, ppo_clip_loss, rloo_advantages,
                                 step_groups, train)

#: Two tasks of four samples: distinct values, ties and an all-equal group.
REWARDS = [1.0, 0.0, 0.5, 0.25, 0.0, 0.0, 1.0, 1.0, 0.3, 0.3, 0.3, 0.3]


@pytest.fixture(scope="module")
def trl_advantages(tiny_ar_folder, tmp_path_factory):
    """TRL's advantages of REWARDS in groups of 4, from `_generate_and_score_completions` of a
    GRPOTrainer and an RLOOTrainer built on the tiny model (the rewards come from a reward
    function that returns them)."""
    from datasets import Dataset
    from trl import GRPOConfig as TRLGRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer

    from lmgym.models.checkpoints import load_checkpoint

    model, tokenizer, _ = load_checkpoint(tiny_ar_folder)
    prompts = ["find the key", "open the door", "enter the vault"]
    out = {}
    for name, config, trainer_class in (("grpo", TRLGRPOConfig, GRPOTrainer), ("rloo", RLOOConfig, RLOOTrainer)):
        args = config(output_dir=str(tmp_path_factory.mktemp("trl")), num_generations=4,
                      per_device_train_batch_size=len(REWARDS), max_completion_length=3, report_to=[], use_cpu=True,
                      save_strategy="no")
        trainer = trainer_class(model=model, reward_funcs=lambda prompts, completions, **_: REWARDS[:len(completions)],
                                args=args, train_dataset=Dataset.from_dict({"prompt": prompts}), processing_class=tokenizer)
        scored = trainer._generate_and_score_completions([{"prompt": p} for p in prompts for _ in range(4)])
        out[name] = scored["advantages"].double()
    return out


def test_grpo_advantages_equal_trls(trl_advantages):
    ours = grpo_advantages(torch.tensor(REWARDS, dtype=torch.float64).view(-1, 4)).flatten()
    assert torch.allclose(ours, trl_advantages["grpo"], atol=1e-5)
    assert ours[8:].abs().max() == 0  # equal returns: no signal


def test_rloo_advantages_equal_trls(trl_advantages):
    ours = rloo_advantages(torch.tensor(REWARDS, dtype=torch.float64).view(-1, 4)).flatten()
    assert torch.allclose(ours, trl_advantages["rloo"], atol=1e-6)


def trl_loss(loss_type, logprobs, old, ref, advantages, mask, beta, is_ratio, eps=0.2):
    """TRL's `GRPOTrainer._compute_loss` run on fixed per-token log-probs: the trainer object is
    a stand-in that returns them from `_get_per_token_logps_and_entropies` and holds the
    options the method reads."""
    from trl import GRPOTrainer

    single = SimpleNamespace(reduce=lambda t, reduction: t, gather=lambda t: t,
                             gather_for_metrics=lambda t: t, num_processes=1, sync_gradients=True)
    trainer = SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *a, **k: (logprobs, torch.zeros_like(logprobs), None),
        top_entropy_quantile=1.0, aux_loss_enabled=False, off_policy_mask_threshold=None,
        importance_sampling_level="token", beta=beta, loss_type=loss_type, epsilon_low=eps, epsilon_high=eps,
        args=SimpleNamespace(use_bias_correction_kl=False, delta=None), use_vllm=is_ratio is not None,
        vllm_importance_sampling_correction=True, model=SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1, _entropy_bonus_enabled=False, accelerator=single,
        _metrics={"train": defaultdict(list)})
    batch, width = logprobs.shape
    inputs = {"prompt_ids": torch.zeros(batch, 2, dtype=torch.long), "prompt_mask": torch.ones(batch, 2),
              "completion_ids": torch.zeros(batch, width, dtype=torch.long), "completion_mask": mask.float(),
              "advantages": advantages, "old_per_token_logps": old, "ref_per_token_logps": ref,
              "importance_sampling_ratio": is_ratio}
    return GRPOTrainer._compute_loss(trainer, None, inputs)


@pytest.mark.parametrize("aggregation, loss_type", [("turn", "grpo"), ("token", "bnpo")])
@pytest.mark.parametrize("kl_coef", [0.0, 0.05])
@pytest.mark.parametrize("tis", [False, True])
def test_ppo_clip_loss_equals_trls(aggregation, loss_type, kl_coef, tis):
    generator = torch.Generator().manual_seed(0)
    shape = (4, 6)
    old = -torch.rand(shape, generator=generator) * 3
    logprobs = old + torch.randn(shape, generator=generator) * 0.4  # ratios inside and outside the clip range
    ref = old + torch.randn(shape, generator=generator) * 0.2
    advantages = torch.tensor([1.5, -0.7, 0.3, -2.0])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0], [1, 0, 0, 0, 0, 0]], dtype=torch.bool)
    sampler = old + torch.randn(shape, generator=generator) * 0.3
    is_weights = torch.exp(old - sampler).clamp(max=2.0) if tis else None  # TIS, cap C = 2
    ours, sums = ppo_clip_loss(logprobs, old, advantages, mask, 0.2, ref_logprobs=ref, kl_coef=kl_coef,
                               is_weights=is_weights, aggregation=aggregation)
    theirs = trl_loss(loss_type, logprobs, old, ref, advantages, mask, kl_coef, is_weights)
    assert torch.allclose(ours, theirs, atol=1e-6), (ours, theirs)
    assert 0 < sums["clipped"] < mask.sum()  # the example reaches the clip on some tokens, not all


def test_micro_batches_add_up_to_the_batch():
    generator = torch.Generator().manual_seed(1)
    old = -torch.rand(6, 5, generator=generator)
    logprobs = old + 0.3 * torch.randn(6, 5, generator=generator)
    advantages, mask = torch.randn(6, generator=generator), torch.rand(6, 5, generator=generator) > 0.3
    for aggregation in ("turn", "token"):
        whole, _ = ppo_clip_loss(logprobs, old, advantages, mask, 0.2, aggregation=aggregation)
        parts = sum(ppo_clip_loss(logprobs[i:i + 2], old[i:i + 2], advantages[i:i + 2], mask[i:i + 2], 0.2,
                                  aggregation=aggregation, n_sequences=6, n_tokens=mask.sum().item())[0]
                    for i in range(0, 6, 2))
        assert torch.allclose(whole, parts, atol=1e-6)


def test_batched_completion_logprobs_equal_each_turn_scored_alone(tiny_ar_folder):
    """Left padding and logits on the completion window only: each written token's log-prob and
    entropy are those of the turn run alone through the whole model."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_ar_folder).eval()
    generator = torch.Generator().manual_seed(0)
    samples = [Sample(torch.randint(5, 200, (n,), generator=generator).tolist(), start, 0.0)
               for n, start in ((12, 9), (7, 2), (20, 18))]  # completions of 3, 5 and 2 tokens
    ids, attention, written = collate(samples, pad=0)
    with torch.no_grad():
        taken, entropy = completion_logprobs(model, ids, attention, 1.0, written.shape[1])
        for row, sample in enumerate(samples):
            alone = torch.tensor([sample.ids])
            logp = torch.log_softmax(model(alone).logits[0, :-1].float(), dim=-1)[sample.start - 1:]
            expected = logp.gather(-1, alone[0, sample.start:].unsqueeze(-1)).squeeze(-1)
            assert written[row].sum() == len(sample.ids) - sample.start
            assert torch.allclose(taken[row][written[row]], expected, atol=1e-4)
            assert torch.allclose(entropy[row][written[row]], -(logp.exp() * logp).sum(-1), atol=1e-4)


# --- GiGPO --------------------------------------------------------------------------------------


def played(task: int, keys: list[str], rewards: list[float]) -> PlayedEpisode:
    steps = [Step(observation="", action="", reward=r, terminated=False, truncated=False, action_valid=True, won=False)
             for r in rewards]
    turns = [TurnTokens([1], [2], None, state_key=key) for key in keys]
    return PlayedEpisode(Episode(env_id="lmgym/KeyDoor-v0", seed=task, task="", agent="lm", steps=steps), turns, task)


def test_turns_with_equal_state_keys_share_a_step_group():
    assert step_groups([(0, "a"), (0, "b"), (0, "a"), (1, "a"), (0, "b")]) == [0, 1, 0, 2, 1]


def test_gigpo_advantages_by_hand():
    gamma = 0.5
    # one task, two episodes: both start in state s0; the first reaches the goal from s1, the
    # second wanders to s2 and back to s0 and never scores
    group = [played(0, ["s0", "s1"], [0.0, 1.0]), played(0, ["s0", "s2", "s0"], [0.0, 0.0, 0.0])]
    values = advantages(group, 2, "gigpo", gamma=gamma, step_weight=1.0)
    episode = grpo_advantages(torch.tensor([[0.5, 0.0]], dtype=torch.float64))[0].tolist()  # R = sum gamma^t r_t
    # anchor group s0: step returns 0.5 (episode 1, t=0), 0 and 0 (episode 2, t=0 and t=2)
    s0 = torch.tensor([0.5, 0.0, 0.0], dtype=torch.float64)
    s0 = ((s0 - s0.mean()) / (s0.std() + 1e-6)).tolist()
    assert values[0] == pytest.approx([episode[0] + s0[0], episode[0] + 0.0])  # s1 is alone: no step signal
    assert values[1] == pytest.approx([episode[1] + s0[1], episode[1] + 0.0, episode[1] + s0[2]])
    assert discounted_returns([0.0, 1.0], gamma) == [0.5, 1.0]


def test_gigpo_needs_state_keys():

    with pytest.raises(InputError, match="state_key"):
        advantages([played(0, [""], [1.0]), played(0, [""], [0.0])], 2, "gigpo")


def test_episode_estimators_give_every_turn_its_episode_advantage():
    group = [played(0, ["a", "b"], [0.0, 1.0]), played(0, ["a"], [0.0]), played(0, ["a", "c", "d"], [0.0, 0.0, 1.0])]
    values = advantages(group, 3, "rloo")
    assert values == [[0.5, 0.5], [-1.0], [0.5, 0.5, 0.5]]


def test_flat_groups_are_the_groups_whose_advantages_are_all_zero():
    # three tasks of two: a tie on the (discounted) return, a win and a loss, a tie at 0
    group = [played(0, ["a"], [1.0]), played(0, ["a", "b"], [0.0, 1.0]), played(1, ["a"], [1.0]),
             played(1, ["a"], [0.0]), played(2, ["a"], [0.0]), played(2, ["a"], [0.0])]
    assert flat_groups(group_returns(group, 2)) == 2
    assert flat_groups(group_returns(group, 2, gamma=0.5)) == 1  # the later win is worth less: not a tie
    for estimator in ("grpo", "rloo"):
        values = advantages(group, 2, estimator)
        assert [all(a == 0 for turns in values[i:i + 2] for a in turns) for i in (0, 2, 4)] == [True, False, True]


# --- runs ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def keydoor_policy(tmp_path_factory):
    """A tiny ReAct policy for KeyDoor that wins some episodes and loses others: a 2-layer,
    32-wide Llama trained by SFT for 300 steps on 64 expert episodes of the train split, with
    the actions only (``Action: go north``: short turns, fast rollouts)."""
    from lmgym.agents.registry import make_agent
    from lmgym.agents.runner import run_episodes
    from lmgym.react import format_completion
    from lmgym.rollouts import write_episode
    from lmgym.training.lm import LMTrainConfig, train as sft

    import gymnasium as gym

    # one folder per session: test_grpo_distributed.py imports this fixture, which pytest then
    # instantiates once more for that module; the second instance finds the policy built
    folder = tmp_path_factory.getbasetemp() / "keydoor_policy"
    if (folder / "checkpoint" / "lmgym.json").exists():
        return folder / "checkpoint"
    folder.mkdir()
    for _, episode in run_episodes([gym.make("lmgym/KeyDoor-v0", split="train")], make_agent("expert"),
                                   [1_000_000 + k for k in range(64)]):
        for step in episode.steps:
            step.reasoning, (step.completion, step.spans) = "", format_completion("", step.action)
        write_episode(folder / "expert.jsonl", episode)
    sft(LMTrainConfig(data=(str(folder / "expert.jsonl"),), out=str(folder), vocab_size=300, hidden_size=32,
                      num_layers=2, num_heads=4, max_prompt_tokens=192, max_answer_tokens=16, steps=300, batch_size=8,
                      lr=1e-2, warmup=5, quiet=True, log_every=300))
    return folder / "checkpoint"


def tiny_run(folder, out, **overrides) -> GRPOConfig:
    options = dict(env="lmgym/KeyDoor-v0", steps=2, ppo_epochs=2, tasks=2, group=4, max_turns=6, max_new_tokens=12,
                   rollout_batch=4, lr=1e-3, quiet=True)
    return GRPOConfig(model=str(folder), out=str(out), **{**options, **overrides})


def weights(folder):
    from lmgym.models.checkpoints import load_checkpoint

    model, _, _ = load_checkpoint(folder)
    return {name: p.detach().clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("estimator", ["grpo", "gigpo"])
def test_same_seed_same_parameters(keydoor_policy, tmp_path, estimator):
    rows = []
    for run in ("a", "b"):
        train(tiny_run(keydoor_policy, tmp_path / run, estimator=estimator))
        rows.append([json.loads(line) for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()])
    first, second = weights(tmp_path / "a" / "checkpoint"), weights(tmp_path / "b" / "checkpoint")
    assert all(torch.equal(first[name], second[name]) for name in first)
    assert not all(torch.equal(first[name], p) for name, p in weights(keydoor_policy).items())  # it trained
    drop = ("time/seconds", "time/env_steps_per_second", "time/tokens_per_second")
    assert [{k: v for k, v in r.items() if k not in drop} for r in rows[0]] == \
           [{k: v for k, v in r.items() if k not in drop} for r in rows[1]]
    assert {"train/reward", "train/success", "train/entropy", "train/clip_fraction", "train/kl",
            "time/env_steps", "train/flat_groups"} <= set(rows[0][0])
    assert all(0 <= r["train/flat_groups"] <= 1 for r in rows[0] if "train/flat_groups" in r)
    meta = json.loads((tmp_path / "a" / "checkpoint" / "lmgym.json").read_text())
    inherited, played = meta["train_panels"]  # the starting policy's data, then this run's tasks
    assert inherited.pop("via") == str(keydoor_policy)
    assert inherited == json.loads((keydoor_policy / "lmgym.json").read_text())["train_panels"][0]
    assert played["split"] == "train" and played["n"] == 2


def test_a_lora_adapter_start_trains_that_adapter(keydoor_policy, tmp_path):
    """A LoRA checkpoint (a ladder SFT model, here a 2-step LoRA run) as the starting policy: the
    new run trains its adapter, on the adapter's own base, and refuses a second --lora-r."""
    train(tiny_run(keydoor_policy, tmp_path / "sft", lora_r=4, lora_alpha=8))
    adapter = tmp_path / "sft" / "checkpoint"
    assert (adapter / "adapter_config.json").is_file()
    train(tiny_run(adapter, tmp_path / "rl"))
    meta = json.loads((tmp_path / "rl" / "checkpoint" / "lmgym.json").read_text())
    assert meta["base_model"] == str(keydoor_policy)
    [first, *_] = [json.loads(line) for line in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert first["train/flat_groups"] < 1 and first["train/grad_norm"] > 0  # this seed's groups carry a signal
    before, after = weights(adapter), weights(tmp_path / "rl" / "checkpoint")
    lora = [name for name in after if "lora_" in name]
    assert lora and any(not torch.equal(before[name], after[name]) for name in lora)
    assert all(torch.equal(before[name], after[name]) for name in after if "lora_" not in name)  # the base is frozen
    with pytest.raises(InputError, match="leave out --lora-r"):
        train(tiny_run(adapter, tmp_path / "twice", lora_r=4))


def test_resumed_run_ends_where_an_uninterrupted_one_does(keydoor_policy, tmp_path, interrupt_training):
    train(tiny_run(keydoor_policy, tmp_path / "whole", steps=4))
    # the same run, stopped in its second batch and restarted: it resumes from the step-2 checkpoint
    with interrupt_training(3):
        train(tiny_run(keydoor_policy, tmp_path / "stopped", steps=4, save_every=2))
    train(tiny_run(keydoor_policy, tmp_path / "stopped", steps=4, save_every=2))
    whole, resumed = weights(tmp_path / "whole" / "checkpoint"), weights(tmp_path / "stopped" / "checkpoint")
    assert all(torch.allclose(whole[name], resumed[name]) for name in whole)


def test_bad_options_are_one_line(tiny_ar_folder, tmp_path):

    with pytest.raises(InputError, match="multiples of --ppo-epochs"):
        train(tiny_run(tiny_ar_folder, tmp_path / "x", steps=3))
    with pytest.raises(InputError, match="unknown env"):
        train(tiny_run(tiny_ar_folder, tmp_path / "x", env="lmgym/Nope-v0"))


def test_grpo_raises_held_out_success_on_keydoor(keydoor_policy, tmp_path):
    """Does it learn: six iterations of GRPO (4 tasks x 8 episodes of the train split each)
    raise the greedy success on 64 held-out tasks (test split) by a real margin."""
    row = train(GRPOConfig(model=str(keydoor_policy), out=str(tmp_path / "learn"), env="lmgym/KeyDoor-v0", steps=12,
                           ppo_epochs=2, tasks=4, group=8, max_turns=8, max_new_tokens=12, lr=6e-4, eval_every=6,
                           eval_episodes=64, eval_split="test", quiet=True))
    curve = [json.loads(line) for line in (tmp_path / "learn" / "metrics.jsonl").read_text().splitlines()]
    evaluations = [r["eval/success"] for r in curve if "eval/success" in r]
    start, end = evaluations[0], row["eval/success"]
    assert len(evaluations) == 2 and 0.2 < start < 0.7  # the start wins some tasks and loses others
    # measured: 29/64 -> 40/64 (lmgym train grpo --lr 6e-4 ..., docs/grpo.md); at least 7 more wins asserted
    assert end >= start + 7 / 64, evaluations


def test_turns_are_read_from_the_steps_an_lm_agent_wrote():
    steps = [Step(observation="", action="north", reward=0.0, terminated=False, truncated=False, action_valid=True,
                  won=False, state_key="k", prompt_token_ids=[5, 6, 7], completion_token_ids=[8, 9],
                  token_logprobs=[-0.1, -0.2])]
    [turn] = turns_of(Episode(env_id="lmgym/KeyDoor-v0", seed=0, task="", agent="lm", steps=steps))
    assert (turn.prompt_ids, turn.completion_ids, turn.sampler_logprobs, turn.state_key) == \
           ([5, 6, 7], [8, 9], [-0.1, -0.2], "k")
    steps[0].completion_token_ids = []  # a text-only sampler: nothing to score
    with pytest.raises(InputError, match="no token ids"):
        turns_of(Episode(env_id="lmgym/KeyDoor-v0", seed=0, task="", agent="lm", steps=steps))


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs the ray extra")
def test_ray_workers_play_the_same_groups_as_this_process(keydoor_policy, tmp_path):
    """--rollout-workers: the tasks dealt to two Ray workers come back as the episodes, token ids
    and log-probs this process plays from the same GGUF and seeds, in task order."""
    import ray

    from lmgym.models.export import export_gguf
    from lmgym.training.agent_rollouts import play_groups_on_ray, play_groups_with

    gguf = export_gguf(keydoor_policy, tmp_path / "policy.gguf", dtype="f32")
    backend = {"backend": "llamacpp", "model": str(gguf), "max_sequences": 4}
    task_seeds, seeds = [11, 12, 13], [[100 * t + g for g in range(2)] for t in range(3)]
    kwargs = {"temperature": 1.0, "batch_size": 4, "max_new_tokens": 12}
    here = play_groups_with(backend, str(keydoor_policy), "lmgym/KeyDoor-v0", task_seeds, 2, seeds, 6, kwargs)
    try:
        there = play_groups_on_ray(2, backend, str(keydoor_policy), "lmgym/KeyDoor-v0", task_seeds, 2, seeds, 6, kwargs)
    finally:
        ray.shutdown()
    assert [p.task_index for p in there] == [0, 0, 1, 1, 2, 2]
    assert [[s.action for s in p.episode.steps] for p in there] == [[s.action for s in p.episode.steps] for p in here]
    for ours, theirs in zip(here, there):
        for a, b in zip(ours.turns, theirs.turns):
            assert (a.prompt_ids, a.completion_ids, a.state_key) == (b.prompt_ids, b.completion_ids, b.state_key)
            assert a.sampler_logprobs == pytest.approx(b.sampler_logprobs, abs=1e-6)


def test_ray_workers_need_the_llamacpp_sampler(keydoor_policy, tmp_path):
    with pytest.raises(InputError, match="--rollout-workers needs --sampler llamacpp"):
        train(tiny_run(keydoor_policy, tmp_path / "r", rollout_workers=2))
