"""The P-ReAct search agent: its turn layout, the call dispatched while the reasoning decodes, serial mode."""

import time

import gymnasium as gym
import pytest
import torch
from types import SimpleNamespace

import lmgym  # noqa: F401
from lmgym.agents.preact import PReActAgent, TurnLayout, action_of, call_text
from lmgym.agents.registry import make_agent
from lmgym.agents.runner import run_episode
from lmgym.benchmarks.runner import read_rows, run_benchmark
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec

ENV = "lmgym/HotPotQA-Gen-Easy-v0"


def test_call_text_and_action_round_trip():
    assert call_text("search[Fan Reinreth]") == "search Fan Reinreth"
    assert action_of("search Fan Reinreth") == "search[Fan Reinreth]"
    assert action_of(call_text("finish[1921]")) == "finish[1921]"
    assert action_of("") == ""


def test_the_layout_puts_each_region_at_its_place_and_reads_back(tiny_preact_folder):
    agent = PReActAgent(tiny_preact_folder)
    tokenizer, layout = agent.backend.tokenizer, TurnLayout(48, 24)
    ids = layout.encode(tokenizer, "I search it.", "search[Fan Reinreth]")
    assert len(ids) == layout.length
    assert layout.decode(tokenizer, ids) == ("I search it.", "search Fan Reinreth")
    opening = tokenizer.encode("<tool_call>", add_special_tokens=False)
    closing = tokenizer.encode("</tool_call>", add_special_tokens=False)
    assert ids[48:48 + len(opening)] == opening and ids[-len(closing):] == closing
    assert layout.encode(tokenizer, "word " * 60, "search[x]") is None  # reasoning too long for its region
    assert layout.decode(tokenizer, tokenizer.encode("no call here", add_special_tokens=False))[1] is None
    agent.close()


class Oracle(torch.nn.Module):
    """A "model" that predicts a fixed turn: probability ~0.62 for each reasoning token and ~0.6
    for each call token, so without P-ReAct's bias a threshold sampler commits one token per
    pass, reasoning first; with +0.5 on the call region the whole call commits at once."""

    def __init__(self, target: list[int], vocab: int, reason_tokens: int):
        super().__init__()
        self.target, self.vocab, self.reason_tokens = torch.tensor(target), vocab, reason_tokens

    def forward(self, x, attention_mask=None, **kwargs):
        batch, length = x.shape
        start = length - len(self.target)
        logits = torch.zeros((batch, length, self.vocab))
        for i, token in enumerate(self.target.tolist()):
            p = 0.62 if i < self.reason_tokens else 0.6
            # softmax gives p to `token` when its logit beats the (vocab - 1) others by log(p (V-1) / (1-p))
            logits[:, start + i, token] = torch.log(torch.tensor(p * (self.vocab - 1) / (1 - p)))
        return SimpleNamespace(logits=logits)


def oracle_agent(folder, mode, action):
    agent = PReActAgent(folder, mode=mode, cache="none")
    tokenizer, layout = agent.backend.tokenizer, agent.layout
    target = layout.encode(tokenizer, "The question asks about it; I search it.", action)
    agent.backend.model = Oracle(target, len(tokenizer), layout.reason_tokens)
    return agent


@pytest.mark.parametrize("mode", ["parallel", "serial"])
def test_parallel_mode_dispatches_the_search_while_the_reasoning_decodes(tiny_preact_folder, mode):
    env = gym.make(ENV, tool_latency_s=0.5)
    observation, info = env.reset(seed=0)
    first = make_agent("teacher")
    first.reset(seed=0, env_id=ENV)
    action = first.act(observation, info)
    assert action.startswith("search[")
    agent = oracle_agent(tiny_preact_folder, mode, action)
    agent.use_env(0, env)
    agent.reset(seed=1, env_id=ENV)
    decision = agent.decide(observation, info)
    assert decision.action == action
    extra = decision.extra
    start = time.perf_counter()
    step_observation, *_ = env.step(decision.action)
    step_seconds = time.perf_counter() - start
    assert step_observation == env.unwrapped.tools.search(action[7:-1])
    if mode == "parallel":
        assert extra["call_committed_pass"] == 1 < extra["forward_passes"]
        assert extra["dispatched_s"] < extra["decoded_s"] <= extra["returned_s"]
        assert extra["returned_s"] >= 0.5  # the tool's latency was waited for inside the turn ...
        assert step_seconds < 0.5  # ... and the step reused the fetched page instead of paying it again
    else:
        assert extra["dispatched_s"] is None and extra["returned_s"] is None
        assert extra["call_committed_pass"] > agent.layout.reason_tokens // 2  # the call came late
        assert step_seconds >= 0.5  # the step ran the search
    agent.close()


def test_both_modes_play_in_the_benchmark_runner(tiny_preact_folder, tmp_path):
    spec = BenchmarkSpec("preact-smoke", envs=(EnvSpec(ENV, kwargs={"tool_latency_s": 0.01}),),
                         agents=(AgentSpec("preact", kwargs={"model": str(tiny_preact_folder)}),
                                 AgentSpec("dllm-react", kwargs={"model": str(tiny_preact_folder)})),
                         episodes=2, max_steps=3)
    run_benchmark(spec, out=tmp_path / "bench", quiet=True, plots=False)
    rows = read_rows(tmp_path / "bench")
    assert len(rows) == 4 and all(r["error"] is None for r in rows), [r["error"] for r in rows]
    assert {r["agent"] for r in rows} == {"preact", "dllm-react"}
    assert all(r["cover_em"] is not None for r in rows if r["em"] is not None)


def test_parallel_mode_without_the_env_tools_is_a_clear_error(tiny_preact_folder):
    agent = PReActAgent(tiny_preact_folder)
    agent.reset(seed=0, env_id=ENV)
    with pytest.raises(ValueError, match="env.unwrapped.tools"):
        agent.decide("Question: who?", {"task": "who?"})
    with pytest.raises(ValueError, match="mode must be"):
        PReActAgent(tiny_preact_folder, mode="both")
    with pytest.raises(FileNotFoundError, match="train_preact"):
        PReActAgent(tiny_preact_folder.parent / "missing")
    agent.close()


def test_the_same_seed_gives_the_same_sampled_episode(tiny_preact_folder):
    episodes = []
    for _ in range(2):
        agent = PReActAgent(tiny_preact_folder, temperature=1.0)
        episodes.append([s.completion for s in run_episode(gym.make(ENV), agent, seed=3, max_steps=2).steps])
        agent.close()
    assert episodes[0] == episodes[1]
