"""AR and masked-diffusion training: overfitting, seeding, resuming, checkpoints, data formats."""

import json

import pytest
import torch
from safetensors.torch import load_file

from lmgym.errors import InputError
from lmgym.io import append_jsonl
from lmgym.models.checkpoints import (OPTIMIZER_FILE, install_checkpoint, load_checkpoint, portable_meta,
                                      save_checkpoint)
from lmgym.models.diffusion import generate
from lmgym.models.tokenizer import decode_answer, prompt_ids
from lmgym.react import format_completion
from lmgym.rollouts import Episode, Step, write_episode
from lmgym.training.lm import LMTrainConfig, load_data, main, mdlm_loss, train

TINY = dict(vocab_size=300, hidden_size=32, num_layers=2, num_heads=2, max_prompt_tokens=16, max_answer_tokens=24,
            batch_size=8, warmup=5, log_every=5, threads=1, quiet=True)
COLOURS = ["red", "green", "blue", "black", "white", "pink", "grey", "brown"]


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


@pytest.fixture
def records(tmp_path):
    path = tmp_path / "records.jsonl"
    for i, colour in enumerate(COLOURS * 3):
        append_jsonl(path, {"prompt": f"A {colour} thing, number {i}.", "completion": json.dumps({"colour": colour, "n": i})})
    return path


@pytest.fixture
def one_record(tmp_path):
    path = tmp_path / "one.jsonl"
    append_jsonl(path, {"prompt": "Write a red record.", "completion": '{"colour": "red", "size": 3}'})
    return path


def config(data, out, **overrides):
    return LMTrainConfig(data=(str(data),), out=str(out), **{**TINY, **overrides})


def weights(out):
    return load_file(str(out / "checkpoint" / "model.safetensors"))


def test_ar_overfits_one_record_and_writes_it_back(one_record, tmp_path):
    metrics = train(config(one_record, tmp_path / "ar", objective="ar", steps=60, lr=1e-2))
    assert metrics["train/loss"] < 0.05
    model, tokenizer, meta = load_checkpoint(tmp_path / "ar" / "checkpoint")
    assert meta["kind"] == "ar" and meta["step"] == 60
    # the training layout is [BOS] prompt [SEP]; generate_text adds neither, so build it here
    ids = torch.tensor([prompt_ids(tokenizer, "Write a red record.", 16)])
    from lmgym.models.generation import generate_ids
    new, _ = generate_ids(model, ids, max_new_tokens=24, eos_token_id=tokenizer.eos_token_id)
    assert decode_answer(tokenizer, new[0].tolist()) == '{"colour": "red", "size": 3}'


def test_bf16_autocast_learns_the_record_and_keeps_float32_weights(one_record, tmp_path):
    full = train(config(one_record, tmp_path / "fp32", objective="ar", steps=60, lr=1e-2))
    mixed = train(config(one_record, tmp_path / "bf16", objective="ar", steps=60, lr=1e-2, bf16=True))
    assert mixed["train/loss"] < 0.05
    assert mixed["train/loss"] != full["train/loss"]  # the forward ran in bfloat16
    assert {w.dtype for w in weights(tmp_path / "bf16").values()} == {torch.float32}


def test_mdlm_overfits_one_record_and_the_sampler_writes_it_back(one_record, tmp_path):
    metrics = train(config(one_record, tmp_path / "mdlm", objective="mdlm", steps=150, lr=1e-2))
    model, tokenizer, meta = load_checkpoint(tmp_path / "mdlm" / "checkpoint")
    assert meta["kind"] == "mdlm" and meta["mask_token_id"] == tokenizer.mask_token_id
    assert model.config.is_causal is False
    prompt = torch.tensor([prompt_ids(tokenizer, "Write a red record.", 16)])
    out = generate(model, prompt, steps=24, gen_length=24, block_length=24, mask_id=tokenizer.mask_token_id)
    assert decode_answer(tokenizer, out[0, prompt.shape[1]:].tolist()) == '{"colour": "red", "size": 3}'
    assert metrics["train/loss"] < 0.5


def test_block_schedule_masks_one_block_behind_a_clean_prefix():
    class Recorder(torch.nn.Module):  # uniform logits; remembers the masked input
        device = torch.device("cpu")

        def forward(self, x, attention_mask=None):
            self.seen = x.clone()
            return type("Output", (), {"logits": torch.zeros(x.shape + (10,), requires_grad=True)})()

    mask, eos = 9, 2
    # 2 prompt tokens, then a 10-token answer: 5 content tokens and 5 padding EOS
    x = torch.tensor([[7, 7, 5, 5, 5, 5, 5, 2, 2, 2, 2, 2]])
    batch = {"input_ids": x, "attention_mask": torch.ones_like(x), "answer_mask": torch.tensor([[False] * 2 + [True] * 10])}
    partly_masked = set()
    for seed in range(40):
        model = Recorder()
        mdlm_loss(model, batch, mask, torch.Generator().manual_seed(seed), block_length=4, eos_id=eos)
        answer = model.seen[0, 2:].tolist()
        first = answer.index(mask)
        block = first // 4  # the drawn block, or the one after it when none of its tokens was masked
        assert model.seen[0, :2].tolist() == [7, 7] and answer[:first] == x[0, 2:2 + first].tolist()  # clean prefix
        assert all(token == mask for token in answer[4 * block + 4:])  # later blocks fully masked
        assert answer[8:] == [mask, mask]  # block 2 starts after the first EOS: never drawn
        if any(token != mask for token in answer[4 * block:4 * block + 4]):
            partly_masked.add(block)
    assert partly_masked == {0, 1}


@pytest.mark.parametrize("objective", ["ar", "mdlm"])
def test_same_seed_same_parameters_and_resume_is_exact(records, tmp_path, objective):
    train(config(records, tmp_path / "a", objective=objective, steps=6))
    train(config(records, tmp_path / "b", objective=objective, steps=6))
    train(config(records, tmp_path / "c", objective=objective, steps=3))
    train(config(records, tmp_path / "c", objective=objective, steps=6))  # resumes at step 3
    train(config(records, tmp_path / "d", objective=objective, steps=6, seed=1))
    a, b, c, d = (weights(tmp_path / k) for k in "abcd")
    for name in a:
        assert torch.equal(a[name], b[name]), name
        assert torch.equal(a[name], c[name]), name
    assert any(not torch.equal(a[name], d[name]) for name in a)


def test_save_load_gives_the_same_outputs(records, tmp_path):
    train(config(records, tmp_path / "run", objective="mdlm", steps=2))
    model, tokenizer, meta = load_checkpoint(tmp_path / "run" / "checkpoint")
    save_checkpoint(tmp_path / "copy", model, tokenizer, meta)
    again, tokenizer_again, meta_again = load_checkpoint(tmp_path / "copy")
    x = torch.tensor([prompt_ids(tokenizer, "A red thing", 16)])
    assert torch.equal(model(x).logits, again(x).logits)
    assert tokenizer_again.encode("{\"colour\": 1}") == tokenizer.encode("{\"colour\": 1}")
    assert meta_again == meta


def test_an_installed_checkpoint_is_half_precision_without_local_paths(records, tmp_path, monkeypatch):
    monkeypatch.setenv("LMGYM_ZOO", str(tmp_path / "zoo"))
    train(config(records, tmp_path / "run", steps=2))
    source = tmp_path / "run" / "checkpoint"
    target = install_checkpoint(source, "test/installed", meta={"recipe": "python make_it.py"})
    model, tokenizer, meta = load_checkpoint(target)
    original = load_checkpoint(source)[0]
    stored = load_file(str(target / "model.safetensors"))
    assert {t.dtype for t in stored.values()} == {torch.float16} and not (target / OPTIMIZER_FILE).exists()
    assert str(tmp_path) not in (target / "lmgym.json").read_text()  # no data, out or init folder of this run
    assert meta["recipe"] == "python make_it.py" and meta["step"] == 2
    x = torch.tensor([prompt_ids(tokenizer, "A red thing", 16)])
    assert torch.allclose(model(x).logits, original(x).logits, atol=0.05)  # loaded back in float32


def test_portable_meta_names_zoo_models_and_drops_local_paths(tmp_path, monkeypatch):
    """What an installed model records of its run: no data, output or tokenizer folder; a start in
    the zoo by its zoo name (a GRPO run from a ladder adapter), one elsewhere dropped."""
    monkeypatch.setenv("LMGYM_ZOO", str(tmp_path / "zoo"))
    (tmp_path / "zoo" / "ladder" / "x-sft").mkdir(parents=True)
    meta = {"step": 3, "train_config": {"data": ["/d.jsonl"], "out": "/runs/x", "init": "smollm2", "lr": 0.1},
            "grpo_config": {"out": str(tmp_path / "run"), "model": str(tmp_path / "zoo" / "ladder" / "x-sft"), "lr": 0.2}}
    cleaned = portable_meta(meta)
    assert cleaned == {"step": 3, "train_config": {"init": "smollm2", "lr": 0.1},
                       "grpo_config": {"model": "ladder/x-sft", "lr": 0.2}}
    assert portable_meta({"grpo_config": {"model": str(tmp_path / "elsewhere")}}) == {"grpo_config": {}}
    assert meta["train_config"]["out"] == "/runs/x"  # the run's own meta is left as it is


def test_rollout_files_train_on_their_transcripts_and_record_the_prompt(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    step = Step(observation="You see a door.", action="open door", reward=1.0, terminated=True, truncated=False,
                action_valid=True, won=True, reasoning="The door is closed.")
    write_episode(path, Episode(env_id="lmgym/KeyDoor-v0", seed=0, task="open the door", agent="expert", steps=[step]))
    records, [episode] = load_data((str(path),))
    assert records == [] and episode.steps[0].action == "open door"
    for objective in ("ar", "mdlm"):
        metrics = train(config(path, tmp_path / objective, objective=objective, steps=2, log_every=1, max_answer_tokens=64))
        assert metrics["train/step"] == 2 and {"train/loss", "train/lr", "train/grad_norm"} <= set(metrics)
        meta = load_checkpoint(tmp_path / objective / "checkpoint")[2]
        assert meta["react_prompt"] == {"instructions": False, "few_shot": 0, "show_actions": False, "max_prompt_tokens": 16,
                                       "max_new_tokens": 64}


def test_an_ar_agent_may_write_the_longest_turn_it_was_trained_on(tmp_path):
    """An AR example keeps its turns whole within the prompt and answer budgets together: an agent
    budget below the longest turn cuts it before its action (WebShop's teacher writes up to 91
    tokens a turn, where the budget was 64)."""
    path = tmp_path / "rollouts.jsonl"
    thought = " ".join(["the door is closed"] * 12)
    step = Step(observation="You see a door.", action="open door", reward=1.0, terminated=True, truncated=False,
                action_valid=True, won=True, reasoning=thought)
    write_episode(path, Episode(env_id="lmgym/KeyDoor-v0", seed=0, task="open the door", agent="expert", steps=[step]))
    train(config(path, tmp_path / "ar", steps=1, max_prompt_tokens=128, max_answer_tokens=8))
    _, tokenizer, meta = load_checkpoint(tmp_path / "ar" / "checkpoint")
    written = len(tokenizer.encode(format_completion(thought, "open door")[0], add_special_tokens=False))
    assert meta["react_prompt"]["max_new_tokens"] > written > 8
    positions = json.loads((tmp_path / "ar" / "checkpoint" / "config.json").read_text())["max_position_embeddings"]
    assert positions >= 128 + meta["react_prompt"]["max_new_tokens"]  # the backends cut prompts to these


def test_bad_rows_and_lora_without_a_base_are_clear_errors(tmp_path):
    path = tmp_path / "bad.jsonl"
    append_jsonl(path, {"text": "no prompt"})
    with pytest.raises(InputError, match="bad.jsonl:1"):
        load_data((str(path),))
    with pytest.raises(InputError, match="no such file"):
        load_data((str(tmp_path / "missing.jsonl"),))
    append_jsonl(tmp_path / "ok.jsonl", {"prompt": "a", "completion": "b"})
    with pytest.raises(InputError, match="needs --init"):
        train(config(tmp_path / "ok.jsonl", tmp_path / "out", lora_r=4))


def test_a_longer_prompt_budget_than_the_base_is_recorded_in_its_config(records, tmp_path):
    train(config(records, tmp_path / "base", objective="ar", steps=2))  # built for 16 + 24 + 8 positions
    train(config(records, tmp_path / "longer", objective="ar", steps=2, init=str(tmp_path / "base" / "checkpoint"),
                 max_prompt_tokens=64))
    base, _, _ = load_checkpoint(tmp_path / "base" / "checkpoint")
    longer, _, meta = load_checkpoint(tmp_path / "longer" / "checkpoint")
    assert base.config.max_position_embeddings == 48
    assert longer.config.max_position_embeddings == 64 + 24 + 8 and meta["max_prompt_tokens"] == 64


def test_help_lists_the_config_fields(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "--objective" in text and "masked-diffusion" in text and "--lora-r" in text


def test_ar_to_diffusion_adapter_makes_a_pretrained_ar_folder_bidirectional(records, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    # a "pretrained" AR folder whose tokenizer has no [MASK] (as SmolLM2's has none)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator([f"colour {c}" for c in COLOURS] * 3, trainers.BpeTrainer(
        vocab_size=280, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<eos>")
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))
    model.save_pretrained(tmp_path / "ar")
    tokenizer.save_pretrained(tmp_path / "ar")
    train(config(records, tmp_path / "adapted", objective="mdlm", init=str(tmp_path / "ar"), steps=2, max_answer_tokens=48))
    adapted, adapted_tokenizer, meta = load_checkpoint(tmp_path / "adapted" / "checkpoint")
    assert adapted.config.is_causal is False and meta["kind"] == "mdlm"
    assert adapted_tokenizer.mask_token_id == len(tokenizer)  # [MASK] appended
    assert adapted.get_input_embeddings().num_embeddings == len(tokenizer) + 1
