"""The DiffMAS Solver's LoRA SFT: it learns a trivial task over the trace, the backbone stays
frozen, and gradients reach the upstream agents' LoRA only with --gradient flow."""

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaForCausalLM

from lmgym.agents.kvteam import ROLE_INSTRUCTIONS, KVTeam, load_adapters, load_backbone
from lmgym.models.checkpoints import save_checkpoint
from lmgym.models.tokenizer import train_bpe_tokenizer
from lmgym.rollouts import Episode, Step, write_episodes
from lmgym.training.kvteam_sft import KVTeamSFTConfig, train


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("kvteam_sft")
    questions = [f"Question: what is the colour of box {k}?" for k in range(8)]
    tokenizer = train_bpe_tokenizer(list(ROLE_INSTRUCTIONS.values()) + questions + ["Answer: red"], vocab_size=300)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                         # wide output embeddings: with the default 0.02 no hidden state reaches a
                         # confident logit, and a LoRA on the blocks alone could not learn anything
                         initializer_range=0.5)
    torch.manual_seed(0)
    save_checkpoint(folder / "base", LlamaForCausalLM(config), tokenizer, {"kind": "ar"})
    # the trivial task: every question's reference completion is "Answer: red"
    episodes = [Episode("lmgym/Arith-v0", k, q, "expert", [Step(q, "finish[red]", 1.0, True, False, True, True,
                                                              reasoning="Answer: red")]) for k, q in enumerate(questions)]
    write_episodes(folder / "data.jsonl", episodes)
    return folder


def _run(folder, gradient, steps, lr=3e-2):
    out = folder / f"{gradient}-{steps}"
    train(KVTeamSFTConfig(data=(str(folder / "data.jsonl"),), backbone=str(folder / "base"), out=str(out),
                          gradient=gradient, latent_steps=2, steps=steps, batch_size=2, lr=lr, log_every=1, quiet=True))
    losses = [json.loads(line)["train/loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    return out / "adapter", losses


@pytest.mark.parametrize("gradient", ["stop", "flow"])
def test_learns_a_trivial_task_with_the_backbone_frozen(setup, gradient):
    before = load_file(setup / "base" / "model.safetensors")
    adapter, losses = _run(setup, gradient, steps=30)
    assert sum(losses[-5:]) / 5 < 0.3 * sum(losses[:3]) / 3, losses
    after = load_file(setup / "base" / "model.safetensors")
    assert all(torch.equal(before[k], after[k]) for k in before)  # the backbone file is untouched
    model, tokenizer = load_backbone(str(setup / "base"))
    team_model = load_adapters(model, adapter)
    base_weights = {n: p for n, p in team_model.named_parameters() if "lora_" not in n}
    assert all(not p.requires_grad for p in base_weights.values())
    meta = json.loads((adapter / "lmgym.json").read_text())
    assert meta["kvteam"]["gradient"] == gradient and meta["kvteam"]["latent_steps"] == 2
    team = KVTeam(team_model, tokenizer, "diffmas", latent_steps=2, max_new_tokens=6,
                  upstream_adapter=gradient == "flow")
    assert team.solve("Question: what is the colour of box 3?")[0].answer == "red"


def test_the_control_learns_with_no_team(setup):
    """--num-agents 1: the Solver's LoRA trains on an empty trace and answers alone, as it was trained."""
    out = setup / "alone"
    train(KVTeamSFTConfig(data=(str(setup / "data.jsonl"),), backbone=str(setup / "base"), out=str(out), num_agents=1,
                          latent_steps=2, steps=30, batch_size=2, lr=3e-2, log_every=1, quiet=True))
    losses = [json.loads(line)["train/loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert sum(losses[-5:]) / 5 < 0.3 * sum(losses[:3]) / 3, losses
    assert json.loads((out / "adapter" / "lmgym.json").read_text())["kvteam"]["num_agents"] == 1
    model, tokenizer = load_backbone(str(setup / "base"))
    team = KVTeam(load_adapters(model, out / "adapter"), tokenizer, "diffmas", num_agents=1, max_new_tokens=6)
    [output] = team.solve("Question: what is the colour of box 3?")
    assert output.answer == "red" and output.trace_bytes == 0


def test_gradients_reach_the_upstream_lora_only_when_they_flow(setup):
    stop, _ = _run(setup, "stop", steps=2)
    flow, _ = _run(setup, "flow", steps=2)
    assert not (stop / "upstream").exists()
    upstream = load_file(flow / "upstream" / "adapter_model.safetensors")
    lora_b = [v for k, v in upstream.items() if "lora_B" in k]
    # B starts at zero: it moved only if the Solver's loss reached it through the trace
    assert lora_b and any(v.abs().sum() > 0 for v in lora_b)


def test_an_interrupted_run_resumes_exactly(setup, interrupt_training):
    def config(out, **kwargs):
        return KVTeamSFTConfig(data=(str(setup / "data.jsonl"),), backbone=str(setup / "base"), out=str(setup / out),
                               gradient="flow", latent_steps=2, steps=4, batch_size=2, lr=3e-2, quiet=True, **kwargs)

    train(config("whole"))
    with interrupt_training(3):
        train(config("cut", save_every=2))
    assert json.loads((setup / "cut" / "adapter" / "lmgym.json").read_text())["step"] == 2
    train(config("cut", save_every=2))
    for adapter in ("solver", "upstream"):
        whole = load_file(setup / "whole" / "adapter" / adapter / "adapter_model.safetensors")
        resumed = load_file(setup / "cut" / "adapter" / adapter / "adapter_model.safetensors")
        assert whole.keys() == resumed.keys() and all(torch.allclose(whole[k], resumed[k], atol=1e-6) for k in whole)
    # a finished run keeps its optimizer state: given more steps, it continues
    assert (setup / "cut" / "adapter" / "optimizer.pt").exists()


def test_inherited_panels_name_an_installed_backbone_by_its_zoo_name(tmp_path):
    from lmgym.models.checkpoints import inherited_panels
    from lmgym.agents.kvteam import resolve_installed

    assert inherited_panels(resolve_installed("smollm2")) == [] and inherited_panels(str(tmp_path)) == []
    # the folder the trainer loads, named in the record by its zoo name, not this machine's path
    assert {p["via"] for p in inherited_panels(resolve_installed("arith-ar"))} == {"kvteam/arith-ar"}
