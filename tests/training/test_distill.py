"""Distillation: each loss against TRL's own on the same tensors, PCGrad on hand-made gradients,
the curriculum, and the trainer (learns, deterministic, resumes exactly, one-line errors)."""

import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from lmgym.models import zoo
from lmgym.errors import InputError
from lmgym.io import read_jsonl
from lmgym.models.checkpoints import load_checkpoint, read_meta
from lmgym.models.tokenizer import load_tokenizer
from lmgym.stats import mcnemar_exact
from lmgym.training import distill
from lmgym.training.transcripts import ACT, REASON

TEACHER = zoo.path("react/hotpotqa-preact-ar")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def trl_generalized_jsd():
    """TRL's GKD loss (TRL 1.x keeps GKD under trl.experimental, with a warning on import)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from trl.experimental.gkd import GKDTrainer
        except ImportError:
            from trl import GKDTrainer
    return GKDTrainer.generalized_jsd_loss


def logits_and_mask(seed=0, shape=(3, 7, 11)):
    generator = torch.Generator().manual_seed(seed)
    student = torch.randn(shape, generator=generator) * 2
    teacher = torch.randn(shape, generator=generator) * 2
    mask = torch.rand(shape[:2], generator=generator) < 0.6
    return student, teacher, mask


@pytest.mark.parametrize("beta, ours", [(0.0, distill.forward_kl), (1.0, distill.reverse_kl)])
def test_the_kl_losses_are_trls_generalized_jsd_at_its_ends(beta, ours):
    student, teacher, mask = logits_and_mask()
    labels = torch.where(mask, torch.zeros_like(mask, dtype=torch.long), torch.full_like(mask, -100, dtype=torch.long))
    theirs = trl_generalized_jsd()(student, teacher, labels=labels, beta=beta, temperature=1.0)
    assert torch.allclose(ours(student, teacher, mask), theirs, atol=1e-5)


def test_forward_and_reverse_kl_by_hand():
    # two tokens, vocab 2: p_teacher = (0.5, 0.5), p_student = (0.8, 0.2) at the trained token
    student = torch.log(torch.tensor([[[0.8, 0.2], [0.3, 0.7]]]))
    teacher = torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1]]]))
    mask = torch.tensor([[True, False]])
    forward = 0.5 * math.log(0.5 / 0.8) + 0.5 * math.log(0.5 / 0.2)
    reverse = 0.8 * math.log(0.8 / 0.5) + 0.2 * math.log(0.2 / 0.5)
    assert distill.forward_kl(student, teacher, mask).item() == pytest.approx(forward, abs=1e-6)
    assert distill.reverse_kl(student, teacher, mask).item() == pytest.approx(reverse, abs=1e-6)
    assert distill.forward_kl(teacher, teacher, torch.ones(1, 2, dtype=torch.bool)).item() == pytest.approx(0, abs=1e-7)


def test_sequence_kd_is_the_cross_entropy_of_the_masked_targets():
    student, _, mask = logits_and_mask()
    targets = torch.randint(11, mask.shape, generator=torch.Generator().manual_seed(1))
    expected = torch.nn.functional.cross_entropy(student[mask], targets[mask])
    assert torch.allclose(distill.sequence_kd_loss(student, targets, mask), expected, atol=1e-6)


def test_pcgrad_removes_the_conflicting_components_of_hand_made_gradients():
    g_reason, g_act = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0])
    combined, conflicted = distill.project_conflicting(g_reason, g_act)
    # g_reason - (-1 / 2) g_act = (0.5, 0.5); g_act - (-1 / 1) g_reason = (0, 1)
    assert conflicted and torch.allclose(combined, torch.tensor([0.5, 1.5]))
    # neither projected part increases the other loss to first order
    assert torch.dot(torch.tensor([0.5, 0.5]), g_act) == 0 and torch.dot(torch.tensor([0.0, 1.0]), g_reason) == 0
    # the plain sum (0, 1) would not move along g_reason at all; the projection keeps progress on both
    assert torch.dot(combined, g_reason) > 0 and torch.dot(combined, g_act) > 0
    agreeing, conflicted = distill.project_conflicting(torch.tensor([1.0, 2.0]), torch.tensor([3.0, -1.0]))
    assert not conflicted and torch.equal(agreeing, torch.tensor([4.0, 1.0]))


def test_curriculum_scores_rank_length_and_uncertainty_and_competence_grows_to_one():
    scores = distill.difficulty_scores([2, 2, 5, 9], [0.1, 0.9, 0.5, 2.0])
    assert scores[3] == 1.0  # the longest trajectory and the most uncertain teacher
    assert scores[0] == pytest.approx((0.5 / 3 + 0) / 2)  # tied shortest (mean rank 0.5 of 3), surest
    assert scores[0] < scores[1] and scores[2] > scores[0]
    assert distill.difficulty_scores([3, 3], [1.0, 1.0]) == [0.5, 0.5]  # ties share their rank
    levels = [distill.competence(step, 100, 0.25, 0.5) for step in range(100)]
    assert levels[0] == pytest.approx(0.25) and levels[50] == 1.0 and levels[-1] == 1.0
    assert all(a <= b for a, b in zip(levels, levels[1:]))


def test_mcnemar_exact_p_values():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(6, 0) == pytest.approx(2 / 64)
    assert mcnemar_exact(3, 5) == mcnemar_exact(5, 3) == pytest.approx(2 * (1 + 8 + 28 + 56) / 256)


def test_turns_keep_reason_and_act_roles_and_end_with_the_end_of_turn(teacher_hotpotqa_file):
    from lmgym.react import PromptProfile
    from lmgym.rollouts import read_episodes

    _, tokenizer, meta = load_checkpoint(TEACHER)
    episodes = list(read_episodes(teacher_hotpotqa_file))
    turns, cut = distill.encode_turns(tokenizer, episodes, PromptProfile(max_prompt_tokens=320), 104)
    assert len(turns) == sum(len(e.steps) for e in episodes) and cut == 0
    first = turns[0]
    assert first.answer[-1] == tokenizer.eos_token_id and first.roles[-1] == ACT
    assert REASON in first.roles and set(first.roles) <= {REASON, ACT}
    reason = tokenizer.decode([t for t, r in zip(first.answer, first.roles) if r == REASON])
    assert reason.startswith("Thought:") and episodes[0].steps[0].reasoning.split()[0] in reason
    batch = distill.collate_turns([(t.context, t.answer, t.roles) for t in turns[:3]], tokenizer.pad_token_id)
    assert int(batch["answer"].sum()) == sum(len(t.answer) for t in turns[:3])
    assert torch.equal(batch["answer"], batch["reason"] | batch["act"]) and not (batch["reason"] & batch["act"]).any()


def test_a_turn_longer_than_the_budget_is_kept_cut_to_it_without_eos(teacher_hotpotqa_file):
    """The teacher generating with a budget stops there, without EOS: its turn is what it wrote."""
    from lmgym.react import PromptProfile
    from lmgym.rollouts import read_episodes

    _, tokenizer, _ = load_checkpoint(TEACHER)
    episodes = list(read_episodes(teacher_hotpotqa_file))
    whole, _ = distill.encode_turns(tokenizer, episodes, PromptProfile(max_prompt_tokens=320), 104)
    budget = 12
    turns, cut = distill.encode_turns(tokenizer, episodes, PromptProfile(max_prompt_tokens=320), budget)
    assert len(turns) == len(whole) and cut == sum(len(t.answer) > budget for t in whole) > 0
    for short, full in zip(turns, whole):
        if len(full.answer) > budget:
            assert short.answer == full.answer[:budget] and short.answer[-1] != tokenizer.eos_token_id
            assert short.roles == full.roles[:budget] and short.context == full.context
        else:
            assert short == full


def test_cached_teacher_distributions_equal_a_fresh_forward_pass(teacher_hotpotqa_file):
    """kd and sad read the teacher from a cache built once; on any batch it must give the loss
    a fresh teacher forward pass gives (a reordered batch too: the cache is per turn)."""
    from lmgym.react import PromptProfile
    from lmgym.rollouts import read_episodes

    teacher, tokenizer, _ = load_checkpoint(TEACHER, dtype=torch.float32)
    turns, _ = distill.encode_turns(tokenizer, list(read_episodes(teacher_hotpotqa_file)), PromptProfile(max_prompt_tokens=320), 104)
    turns = turns[:6]
    cached = distill.teacher_log_probs(teacher, turns, tokenizer.pad_token_id, batch_size=4)
    assert [len(c) for c in cached] == [len(t.answer) for t in turns]
    picked = [5, 0, 3]  # other batch composition, other padding than when cached
    batch = distill.collate_turns([(turns[i].context, turns[i].answer, turns[i].roles) for i in picked], tokenizer.pad_token_id)
    with torch.no_grad():
        fresh = teacher(batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    student = torch.randn(fresh.shape, generator=torch.Generator().manual_seed(0))
    from_cache = distill.at_completion([cached[i] for i in picked], batch["answer"])
    for span in ("answer", "reason", "act"):
        assert torch.allclose(distill.forward_kl(student, from_cache, batch[span]),
                              distill.forward_kl(student, fresh, batch[span]), atol=1e-4)
    assert distill.mean_entropy(cached[0]) > 0
    window = distill.completion_window(batch)  # the trainer's logits: only the last K + 1 positions
    with torch.no_grad():
        kept = teacher(batch["input_ids"], attention_mask=batch["attention_mask"],
                       logits_to_keep=window["answer"].shape[1] + 1).logits[:, :-1]
    assert torch.equal(window["targets"][window["answer"]], batch["input_ids"][:, 1:][batch["answer"]])
    for span in ("answer", "reason", "act"):
        assert torch.allclose(distill.forward_kl(kept, distill.at_completion([cached[i] for i in picked], window["answer"]), window[span]),
                              distill.forward_kl(fresh, from_cache, batch[span]), atol=1e-4)

def test_the_teacher_cache_folder_is_reused_only_for_the_same_teacher_and_turns(teacher_hotpotqa_file, tmp_path):
    from lmgym.react import PromptProfile
    from lmgym.rollouts import read_episodes

    teacher, tokenizer, _ = load_checkpoint(TEACHER, dtype=torch.float32)
    turns, _ = distill.encode_turns(tokenizer, list(read_episodes(teacher_hotpotqa_file)), PromptProfile(max_prompt_tokens=320), 104)
    pad, folder = tokenizer.pad_token_id, tmp_path / "cache"
    written = distill.cached_teacher_log_probs(teacher, turns[:4], pad, folder)
    read = distill.cached_teacher_log_probs(teacher, turns[:4], pad, folder)
    assert all(torch.equal(a, b) for a, b in zip(written, read)) and len(read) == 4
    # other turns, or other teacher weights: the folder is stale and is rewritten
    assert [len(c) for c in distill.cached_teacher_log_probs(teacher, turns[1:4], pad, folder)] == [len(t.answer) for t in turns[1:4]]
    with torch.no_grad():
        teacher.lm_head.weight.mul_(2)  # tied to the embeddings: a different teacher
    changed = distill.cached_teacher_log_probs(teacher, turns[1:4], pad, folder)
    assert not torch.allclose(changed[0], read[1])
    assert torch.equal(distill.cached_teacher_log_probs(teacher, turns[1:4], pad, folder)[0], changed[0])
    # the same teacher under bf16 autocast (--teacher-bf16): another cache, close to float32's
    rounded = distill.cached_teacher_log_probs(teacher, turns[1:4], pad, folder, bf16=True)
    assert not torch.equal(rounded[0], changed[0])
    assert torch.allclose(rounded[0].exp(), changed[0].exp(), atol=0.05)
    assert torch.equal(distill.cached_teacher_log_probs(teacher, turns[1:4], pad, folder, bf16=True)[0], rounded[0])


def test_a_student_trained_from_the_cache_folder_equals_one_trained_without(teacher_hotpotqa_file, tmp_path):
    distill.train(config(teacher_hotpotqa_file, tmp_path / "plain", method="kd"))
    cache = str(tmp_path / "cache")
    distill.write_teacher_cache(config(teacher_hotpotqa_file, tmp_path / "unused", teacher_cache=cache))
    distill.train(config(teacher_hotpotqa_file, tmp_path / "cached", method="kd", teacher_cache=cache))
    plain = load_checkpoint(tmp_path / "plain" / "checkpoint")[0].state_dict()
    cached = load_checkpoint(tmp_path / "cached" / "checkpoint")[0].state_dict()
    assert all(torch.equal(plain[k], cached[k]) for k in plain)


def config(data, out, **overrides):
    base = dict(teacher=str(TEACHER), data=(str(data),), out=str(out), hidden_size=16, num_layers=1, num_heads=2,
                steps=4, batch_size=4, warmup=1, log_every=1, quiet=True)
    return distill.DistillConfig(**{**base, **overrides})


def losses_of(out):
    return [json.loads(line)["train/loss"] for line in (out / "metrics.jsonl").open()]


def test_sad_learns_both_spans_on_a_tiny_budget(teacher_hotpotqa_file, tmp_path):
    metrics = distill.train(config(teacher_hotpotqa_file, tmp_path / "sad", steps=40, hidden_size=32, lr=1e-2))
    rows = [json.loads(line) for line in (tmp_path / "sad" / "metrics.jsonl").open()]
    for key in ("train/loss_reason", "train/loss_act"):
        assert sum(r[key] for r in rows[-5:]) < 0.7 * sum(r[key] for r in rows[:5]), key
    assert 0 <= metrics["train/conflict_rate"] <= 1 and metrics["train/competence"] == 1.0
    meta = read_meta(tmp_path / "sad" / "checkpoint")
    assert meta["react_prompt"] == read_meta(TEACHER)["react_prompt"] and meta["parameters"] < meta["teacher_parameters"]


@pytest.mark.parametrize("method, divergence", [("seqkd", "forward_kl"), ("kd", "forward_kl"), ("rkl", "reverse_kl")])
def test_every_baseline_learns_on_a_tiny_budget(method, divergence, teacher_hotpotqa_file, tmp_path):
    # its divergence to the teacher before and after 25 steps: forward KL on the teacher's turns,
    # reverse KL on the student's own samples from the same prompts (rkl's loss draws fresh ones each step)
    from lmgym.react import PromptProfile
    from lmgym.models.networks import build_model, llama_config
    from lmgym.rollouts import read_episodes

    cfg = config(teacher_hotpotqa_file, tmp_path / method, method=method, steps=25, hidden_size=32, lr=1e-2)
    distill.train(cfg)
    teacher, tokenizer, _ = load_checkpoint(TEACHER, dtype=torch.float32)
    turns, _ = distill.encode_turns(tokenizer, read_episodes(teacher_hotpotqa_file), PromptProfile(max_prompt_tokens=320), 104)
    batch = distill.collate_turns([(t.context, t.answer, t.roles) for t in turns], tokenizer.pad_token_id)
    trained = load_checkpoint(tmp_path / method / "checkpoint", dtype=torch.float32)[0]
    fresh = build_model(llama_config(len(tokenizer), distill.student_size(cfg, 432), bidirectional=False, tokenizer=tokenizer), 0)

    def divergence_of(model):
        scored = batch
        if method == "rkl":  # what it minimises: the reverse KL on its own samples (fixed sampling seed)
            samples = distill.student_samples(model, turns, tokenizer.pad_token_id, tokenizer.eos_token_id, 104,
                                              torch.Generator().manual_seed(0))
            scored = distill.collate_turns(samples, tokenizer.pad_token_id)
        with torch.no_grad():
            logits = [m(scored["input_ids"], attention_mask=scored["attention_mask"]).logits[:, :-1] for m in (model, teacher)]
        return getattr(distill, divergence)(*logits, scored["answer"]).item()

    assert divergence_of(trained) < 0.7 * divergence_of(fresh)


def test_a_lora_teacher_on_smollm2_gives_students_its_tokenizer_and_they_learn(teacher_hotpotqa_file, tmp_path):
    # the ladder's SmolLM2 SFT adapter as teacher (issue 40's distillation study): the student
    # shares SmolLM2's vocabulary, so the forward KL is taken over the same 49,152 tokens
    teacher = zoo.path("ladder/hotpotqa-smollm2-sft")
    distill.train(config(teacher_hotpotqa_file, tmp_path / "kd", teacher=str(teacher), method="kd", steps=25, hidden_size=32, lr=1e-2))
    student, tokenizer, meta = load_checkpoint(tmp_path / "kd" / "checkpoint")
    assert student.config.vocab_size == len(load_tokenizer(teacher)) == len(tokenizer) == 49_152
    assert meta["teacher_parameters"] > 50 * meta["parameters"]
    losses = losses_of(tmp_path / "kd")
    assert sum(losses[-3:]) < 0.7 * sum(losses[:3])


def test_same_seed_same_parameters_and_an_interrupted_run_resumes_exactly(teacher_hotpotqa_file, tmp_path, interrupt_training):
    distill.train(config(teacher_hotpotqa_file, tmp_path / "a", steps=6))
    distill.train(config(teacher_hotpotqa_file, tmp_path / "b", steps=6))
    a = load_checkpoint(tmp_path / "a" / "checkpoint")[0].state_dict()
    b = load_checkpoint(tmp_path / "b" / "checkpoint")[0].state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    with interrupt_training(4):
        distill.train(config(teacher_hotpotqa_file, tmp_path / "cut", steps=6, save_every=3))
    assert read_meta(tmp_path / "cut" / "checkpoint")["step"] == 3
    before = read_meta(tmp_path / "cut" / "checkpoint")["train_seconds"]
    distill.train(config(teacher_hotpotqa_file, tmp_path / "cut", steps=6, save_every=3))
    assert read_meta(tmp_path / "cut" / "checkpoint")["train_seconds"] > before > 0  # both attempts' time
    resumed = load_checkpoint(tmp_path / "cut" / "checkpoint")[0].state_dict()
    assert all(torch.allclose(a[k], resumed[k], atol=1e-6) for k in a)
    logged = [[row["train/step"] for row in read_jsonl(tmp_path / run / "metrics.jsonl")] for run in ("a", "cut")]
    assert logged[0] == logged[1] == [1, 2, 3, 4, 5, 6]  # step 4, logged before the interruption, once


def test_bad_input_is_one_line(teacher_hotpotqa_file, tmp_path):
    with pytest.raises(InputError, match="not a model folder"):
        distill.train(config(teacher_hotpotqa_file, tmp_path, teacher=str(tmp_path)))
    with pytest.raises(InputError, match="options of --method sad"):
        distill.train(config(teacher_hotpotqa_file, tmp_path, method="kd", spans="reason"))
    result = subprocess.run([sys.executable, "-m", "lmgym.training.distill", "--teacher", str(tmp_path),
                             "--data", str(teacher_hotpotqa_file)], capture_output=True, text=True)
    assert result.returncode != 0 and result.stderr.strip().count("\n") == 0 and "not a model folder" in result.stderr


def test_help_lists_the_config_fields():
    result = subprocess.run([sys.executable, "-m", "lmgym.training.distill", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    for text in ("--method", "--projection", "--no-curriculum", "--spans", "PCGrad"):
        assert text in result.stdout, text


def test_the_benchmark_runs_a_family_end_to_end_and_combines_runs(tmp_path):
    """studies/distill.py at a tiny budget: teacher data, a student per method plus the four
    ablations, paired evaluation (ablations on --env only), the table and plot; then --combine."""
    script = [sys.executable, str(REPO / "studies" / "distill.py")]
    run = tmp_path / "run"
    result = subprocess.run([*script, "--out", str(run), "--teacher-episodes", "2", "--steps", "2", "--size", "a:16:1",
                             "--methods", "kd", "sad", "--episodes", "2", "--dev-episodes", "2", "--max-steps", "2", "--batch", "2",
                             "--env", "lmgym/HotPotQA-Gen-Easy-v0", "--eval-env", "lmgym/HotPotQA-Gen-v0", "--jobs", "2"],
                            capture_output=True, text=True, timeout=600, env={**os.environ, "MPLBACKEND": "Agg"})
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    data = [json.loads(line) for line in (run / "teacher_rollouts.jsonl").read_text().splitlines()]
    assert len(data) == 2 and all(json.loads(row["env_kwargs_json"])["split"] == "train" for row in data)  # no test task
    names = {(c["env"], c["name"]) for c in summary["cells"]}
    students = {"a-kd", "a-sad", "a-sad-no-projection", "a-sad-no-curriculum", "a-sad-reason-only", "a-sad-act-only"}
    assert {name for env, name in names if env == "lmgym/HotPotQA-Gen-Easy-v0"} == students | {"teacher"}
    assert {name for env, name in names if env == "lmgym/HotPotQA-Gen-v0"} == {"a-kd", "a-sad", "teacher"}
    assert all(c["n"] == 2 and 0 <= c["success"] <= 1 for c in summary["cells"])
    assert [(t["env"], t["size"]) for t in summary["tests"]] == [("lmgym/HotPotQA-Gen-Easy-v0", "a"), ("lmgym/HotPotQA-Gen-v0", "a"),
                                                                 ("lmgym/HotPotQA-Gen-Easy-v0 (dev)", "a")]
    # --jobs 2 trained the students in spawned processes: the same weights as training here
    distill.train(distill.DistillConfig(teacher=str(TEACHER), data=(str(run / "teacher_rollouts.jsonl"),), out=str(tmp_path / "again"),
                                        method="sad", hidden_size=16, num_layers=1, steps=2, quiet=True))
    here = load_checkpoint(tmp_path / "again" / "checkpoint")[0].state_dict()
    spawned = load_checkpoint(run / "students" / "a-sad" / "checkpoint")[0].state_dict()
    assert here.keys() == spawned.keys() and all(torch.equal(here[k], spawned[k]) for k in here)
    combined = subprocess.run([*script, "--combine", str(run), str(run), "--out", str(tmp_path / "all")],
                              capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"})
    assert combined.returncode == 0, combined.stderr[-3000:]
    table = (tmp_path / "all" / "table.md").read_text()
    assert table.startswith("| method | lmgym/HotPotQA-Gen-Easy-v0 a | lmgym/HotPotQA-Gen-v0 a |") and "| sad-act-only |" in table
    assert (tmp_path / "all" / "success_vs_size.png").stat().st_size > 0
    # the same env from a teacher of another size: a column set per teacher, named by its size
    larger = tmp_path / "larger"
    larger.mkdir()
    teacher_size = f"{next(c['parameters'] for c in summary['cells'] if c['method'] == 'teacher') / 1e6:.1f}M"
    for cell in summary["cells"]:
        cell["parameters"] = 11_000_000 if cell["method"] == "teacher" else cell["parameters"]
    (larger / "summary.json").write_text(json.dumps(summary))
    both = subprocess.run([*script, "--combine", str(run), str(larger), "--out", str(tmp_path / "both")],
                          capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"})
    assert both.returncode == 0, both.stderr[-3000:]
    header = (tmp_path / "both" / "table.md").read_text().splitlines()[0]
    assert f"| lmgym/HotPotQA-Gen-v0 ({teacher_size} teacher) a |" in header and "| lmgym/HotPotQA-Gen-v0 (11.0M teacher) a |" in header
    # another teacher of the same size (another folder): named by its folder too, not merged
    other = tmp_path / "other"
    other.mkdir()
    summary["options"]["teacher"] = "runs/teachers/another-teacher"
    (other / "summary.json").write_text(json.dumps(summary))
    three = subprocess.run([*script, "--combine", str(run), str(larger), str(other), "--out", str(tmp_path / "three")],
                           capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"})
    assert three.returncode == 0, three.stderr[-3000:]
    header = (tmp_path / "three" / "table.md").read_text().splitlines()[0]
    assert f"| lmgym/HotPotQA-Gen-v0 ({teacher_size} teacher) a |" in header
    assert f"| lmgym/HotPotQA-Gen-v0 (11.0M teacher {TEACHER.name}) a |" in header
    assert "| lmgym/HotPotQA-Gen-v0 (11.0M teacher another-teacher) a |" in header
    missing = subprocess.run([*script, "--combine", str(tmp_path / "nothing")], capture_output=True, text=True)
    assert missing.returncode != 0 and missing.stderr.strip().count("\n") == 0 and "not found" in missing.stderr
