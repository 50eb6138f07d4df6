"""The KV-communicating team on a tiny random Llama: positions, trace memory, the realignment,
what each mode changes, determinism, answer parsing."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lmgym.agents.kvteam import (ROLE_INSTRUCTIONS, KVTeam, Trace, extract_answer, kv_bytes_per_token, majority_answer,
                                 realign, realignment, role_message, roles)
from lmgym.agents.registry import make_agent, resolve_agent
from lmgym.errors import InputError
from lmgym.models.tokenizer import chat_prompt_ids, train_bpe_tokenizer
from lmgym.training.lora import add_lora

QUESTION = "Question: Ada has 3 apples. Ada buys 4 more apples. How many apples does Ada have now?"


@pytest.fixture(scope="module")
def tokenizer():
    texts = list(ROLE_INSTRUCTIONS.values()) + [f"{QUESTION} 3 + {k} = {3 + k}. Answer: {3 + k}" for k in range(30)]
    return train_bpe_tokenizer(texts, vocab_size=300, split_digits=True)


@pytest.fixture(scope="module")
def model(tokenizer):
    torch.set_num_threads(1)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         tie_word_embeddings=False, initializer_range=0.2, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


class PositionRecorder(torch.nn.Module):
    """Wraps a model and records the position ids of every call."""

    def __init__(self, model):
        super().__init__()
        self.model, self.positions = model, []
        self.config = model.config

    def forward(self, *args, **kwargs):
        self.positions.extend(kwargs["position_ids"][0].tolist())
        return self.model(*args, **kwargs)


@pytest.mark.parametrize("keep", ["all", "latent", "latest"])
def test_positions_continue_across_segments_and_decoding(model, tokenizer, keep):
    team = KVTeam(model, tokenizer, "latentmas", latent_steps=3, keep=keep, max_new_tokens=5)
    team.net = PositionRecorder(model)
    out = team.solve(QUESTION)[0]
    positions = team.net.positions
    # every token of the trace, the Solver's prompt and its decoding has the next position:
    # none repeated, none skipped, whatever the cache kept
    assert positions == list(range(len(positions)))
    assert out.generated_tokens >= 1


def test_keep_options_cut_the_cache_but_not_the_positions(model, tokenizer):
    traces = {}
    for keep in ("all", "latent", "latest"):
        with torch.no_grad():
            traces[keep] = KVTeam(model, tokenizer, "latentmas", latent_steps=4, keep=keep).build_trace(QUESTION)
    prompts = [len(chat_prompt_ids(tokenizer, role_message(r, QUESTION))) for r in roles(4)[:-1]]
    total = sum(prompts) + 3 * 4
    assert all(t.next_position == total for t in traces.values())
    assert traces["all"].length() == total
    assert traces["latent"].length() == 3 * 4 and all(s.kind == "latent" for s in traces["latent"].segments)
    assert traces["latest"].length() == prompts[-1] + 4
    assert {s.role for s in traces["latest"].segments} == {"refiner"}


def test_trace_memory_is_counted_in_bytes(model, tokenizer):
    per_token = kv_bytes_per_token(model)
    # 2 layers x (keys + values) x 2 kv heads x head_dim 8 x 4 bytes
    assert per_token == 2 * 2 * 2 * 8 * 4
    for keep in ("all", "latent"):
        out = KVTeam(model, tokenizer, "latentmas", latent_steps=2, keep=keep, max_new_tokens=2).solve(QUESTION)[0]
        assert out.trace_bytes == out.trace_tokens * per_token > 0
    single = KVTeam(model, tokenizer, "single", max_new_tokens=2).solve(QUESTION)[0]
    assert single.trace_bytes == 0 and single.trace_tokens == 0
    text = KVTeam(model, tokenizer, "textmas", text_tokens=3, max_new_tokens=2).solve(QUESTION)[0]
    assert len(text.messages) == 3 and text.trace_bytes == text.trace_tokens * per_token


def test_realignment_matches_a_direct_least_squares_solution(model):
    matrix, norm = realignment(model)
    w_in = model.get_input_embeddings().weight.detach().double()
    w_out = model.get_output_embeddings().weight.detach().double()
    dim = w_out.shape[1]
    # ridge least squares min ||W_out X - W_in||^2 + 1e-5 ||X||^2 as one stacked lstsq problem
    stacked = torch.cat([w_out, (1e-5 ** 0.5) * torch.eye(dim, dtype=torch.float64)])
    target = torch.cat([w_in, torch.zeros(dim, dim, dtype=torch.float64)])
    direct = torch.linalg.lstsq(stacked, target).solution
    assert torch.allclose(matrix.double(), direct, atol=1e-4, rtol=1e-3)
    assert norm == pytest.approx(float(w_in.norm(dim=1).mean()), rel=1e-5)
    hidden = torch.randn(3, dim)
    assert torch.allclose(realign(hidden, matrix, norm).norm(dim=-1), norm.expand(3), rtol=1e-4)


def test_modes_differ_only_where_they_should(model, tokenizer):
    single = KVTeam(model, tokenizer, "single", max_new_tokens=6)
    latent = KVTeam(model, tokenizer, "latentmas", latent_steps=3, max_new_tokens=6)
    # the Solver reads the same prompt in every mode but TextMAS
    assert single.solver_ids(QUESTION) == latent.solver_ids(QUESTION)
    # with nothing kept (no latent steps, keep only latent steps) the latent team is the Solver alone
    empty = KVTeam(model, tokenizer, "latentmas", latent_steps=0, keep="latent", max_new_tokens=6)
    assert empty.solve(QUESTION)[0].text == single.solve(QUESTION)[0].text
    # the trace changes what the Solver predicts
    with torch.no_grad():
        alone = single.solver_logits(Trace(), single.solver_ids(QUESTION), [5, 6])
        with_trace = latent.solver_logits(latent.build_trace(QUESTION), latent.solver_ids(QUESTION), [5, 6])
    assert not torch.allclose(alone, with_trace)
    # DiffMAS with a fresh LoRA (B = 0) is LatentMAS exactly; the adapter is the only difference
    peft_model = add_lora(model, adapter_name="solver")
    try:
        diff = KVTeam(peft_model, tokenizer, "diffmas", latent_steps=3, max_new_tokens=6)
        assert diff.solve(QUESTION)[0].text == latent.solve(QUESTION)[0].text
        nll_diff, n = diff.reference_nll(QUESTION, "3 + 4 = 7. Answer: 7")
        nll_latent, m = latent.reference_nll(QUESTION, "3 + 4 = 7. Answer: 7")
        assert n == m and nll_diff == pytest.approx(nll_latent, rel=1e-5)
    finally:
        peft_model.unload()  # leave the shared fixture model without LoRA layers


@pytest.mark.parametrize("mode", ["single", "textmas", "latentmas"])
def test_one_communication_serves_every_solver_pass(model, tokenizer, mode):
    team = KVTeam(model, tokenizer, mode, latent_steps=3, text_tokens=4, max_new_tokens=6)
    reference = "3 + 4 = 7. Answer: 7"
    shared = team.prepare(QUESTION)
    length, position = shared.trace.length(), shared.trace.next_position
    # Solver passes over a prepared communication equal fresh ones and leave it as it was
    assert team.solve(QUESTION, communication=shared)[0].text == team.solve(QUESTION)[0].text
    assert team.reference_nll(QUESTION, reference, shared) == pytest.approx(team.reference_nll(QUESTION, reference), rel=1e-6)
    assert (shared.trace.length(), shared.trace.next_position) == (length, position)
    assert team.solve(QUESTION, communication=shared)[0].text == team.solve(QUESTION)[0].text


def test_prefill_without_logits_leaves_the_same_trace(model, tokenizer):
    team = KVTeam(model, tokenizer, "latentmas", latent_steps=3)
    assert team.skip_logits  # Llama takes logits_to_keep
    with torch.no_grad():
        lean = team.build_trace(QUESTION)
        team.skip_logits = {}
        full = team.build_trace(QUESTION)
    for a, b in zip(lean.cache.layers, full.cache.layers):
        assert torch.allclose(a.keys, b.keys, atol=1e-6) and torch.allclose(a.values, b.values, atol=1e-6)


def test_sampling_is_deterministic_under_a_seed(model, tokenizer):
    team = KVTeam(model, tokenizer, "latentmas", latent_steps=2, max_new_tokens=12)
    first = [o.text for o in team.solve(QUESTION, temperature=1.0, seed=3, samples=3)]
    again = [o.text for o in team.solve(QUESTION, temperature=1.0, seed=3, samples=3)]
    other = [o.text for o in team.solve(QUESTION, temperature=1.0, seed=4, samples=3)]
    assert first == again
    assert first != other
    # greedy samples decoded as one batch are the greedy answer, each over its own copy of the trace
    greedy = team.solve(QUESTION)[0].text
    assert [o.text for o in team.solve(QUESTION, samples=3)] == [greedy] * 3


def test_bad_settings_are_one_line_errors(model, tokenizer):
    for kwargs in ({"mode": "debate"}, {"keep": "some"}, {"latent_steps": -1}, {"mode": "diffmas"}):
        with pytest.raises(InputError):
            KVTeam(model, tokenizer, **kwargs)
    with pytest.raises(InputError):
        make_agent("diffmas", backbone="smollm2")  # no adapter
    with pytest.raises(InputError):
        make_agent("single", backbone="/no/such/folder")


def test_the_four_modes_are_registered_agents():
    for name in ("single", "textmas", "latentmas", "diffmas"):
        assert resolve_agent(name).mode == name


def test_roles_and_answers():
    assert roles(4) == ["planner", "critic", "refiner", "solver"]
    assert roles(1) == ["solver"] and roles(6)[3:] == ["planner", "critic", "solver"]
    assert extract_answer("3 + 4 = 7. Answer: 7") == "7"
    assert extract_answer("so it is 12 apples.\nAnswer: 12 apples.", numeric=True) == "12"
    assert extract_answer("The total is 1,204.", numeric=True) == "1,204"
    assert extract_answer("Paris is the capital.\nIt is France.") == "It is France"
    assert extract_answer("answer: J. R. R. Tolkien\nmore") == "J. R. R. Tolkien"
    assert extract_answer("3 + 4 = 7. Answer:") == "" and extract_answer("") == ""
    assert majority_answer(["7", "8", "8 ", "7"]) == "7"  # tie: the first drawn
    assert majority_answer(["7", "8", "8"]) == "8"
