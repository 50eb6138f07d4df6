"""LM agents' throughput: batching (B = 1 vs B = 8) and the KV cache kept across turns.

For each model and env, the same held-out seeds are played three ways, one after the other in
this process (so the ratios compare runs under the same machine load):

* ``B=1, no cache``: one episode at a time, every prompt encoded afresh;
* ``B=1, cache``: one at a time, each episode's KV cache kept across its turns
  (`lmgym.models.backends.hf`);
* ``B=8, cache``: eight episodes in lockstep (`lmgym.agents.runner.run_episodes`), one batched
  model call per step (B = the number of episodes when fewer).

Reported: episodes per minute, generated tokens per second, prompt tokens actually encoded,
and the ratios (batching speed-up = B=8 over B=1 episodes/min, both cached; cache saving =
cached over uncached at B=1). Greedy decoding; the episodes' actions are compared across the
three runs (a difference would mean batching or caching changed a decision).

Models: the tiny ReAct models trained here (``zoo/react/<family>-ar``,
`examples/train_tiny_react.py`) and, unless ``--quick``, SmolLM2-135M-Instruct few-shot.

Run: ``python studies/lm_agents.py`` (full) or ``--quick`` (tiny models, 2 episodes of 3 steps: seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import gymnasium as gym
import torch

from lmgym.agents.lm import LMAgent
from lmgym.agents.runner import run_episodes
from lmgym.models import zoo

ENVS = {"lmgym/ALFWorld-Gen-v0": "alfworld", "lmgym/HotPotQA-Gen-v0": "hotpotqa"}


def play(model: str, env_id: str, seeds: list[int], batch: int, cache: bool, max_steps: int, **agent) -> dict:
    agent = LMAgent(model, batch_size=batch, backend_kwargs={"cache_sessions": cache, "threads": 1}, **agent)
    envs = [gym.make(env_id) for _ in range(batch)]
    start = time.perf_counter()
    episodes = dict(run_episodes(envs, agent, seeds, env_id=env_id, max_steps=max_steps))
    seconds = time.perf_counter() - start
    agent.close()
    steps = [s for e in episodes.values() for s in e.steps]
    generated = sum(s.completion_tokens for s in steps)
    encoded = sum(s.prompt_tokens - json.loads(s.agent_json).get("cached_tokens", 0) for s in steps)
    return {"batch": batch, "cache": cache, "episodes": len(episodes), "steps": len(steps), "seconds": round(seconds, 2),
            "episodes_per_min": round(60 * len(episodes) / seconds, 3),
            "generated_tokens_per_s": round(generated / seconds, 2), "prompt_tokens_encoded": encoded,
            "won": sum(e.won for e in episodes.values()),
            "actions": [[s.action for s in episodes[k].steps] for k in sorted(episodes)]}


def measure(name: str, model: str, env_id: str, episodes: int, max_steps: int, **agent) -> dict:
    seeds, batch = list(range(episodes)), min(8, episodes)
    runs = [play(model, env_id, seeds, 1, False, max_steps, **agent),
            play(model, env_id, seeds, 1, True, max_steps, **agent),
            play(model, env_id, seeds, batch, True, max_steps, **agent)]
    uncached, cached, batched = runs
    same = uncached["actions"] == cached["actions"] == batched["actions"]
    for run in runs:
        run.pop("actions")
    return {"model": name, "env": env_id, "runs": runs, "same_actions": same,
            "batching_speedup": round(batched["episodes_per_min"] / cached["episodes_per_min"], 2),
            "cache_speedup": round(cached["episodes_per_min"] / uncached["episodes_per_min"], 2),
            "encoded_token_ratio": round(cached["prompt_tokens_encoded"] / max(1, uncached["prompt_tokens_encoded"]), 3)}


def models(quick: bool) -> list[tuple[str, str, str, dict]]:
    """(name, model, env, agent kwargs) of every measured pair whose model is installed."""
    pairs = []
    for env_id, family in ENVS.items():
        if zoo.is_installed(f"react/{family}-ar"):
            pairs.append((f"tiny {family}-ar", str(zoo.path(f"react/{family}-ar")), env_id, {}))
        if not quick:
            pairs.append(("SmolLM2-135M few-shot", "smollm2", env_id, {"few_shot": 1}))
    return pairs


def run(quick: bool = False, episodes: int | None = None, max_steps: int | None = None) -> dict:
    torch.set_num_threads(1)
    default_episodes, default_steps = (2, 3) if quick else (16, 10)
    episodes, max_steps = episodes or default_episodes, max_steps or default_steps
    results = [measure(name, model, env_id, episodes, max_steps, **kwargs) for name, model, env_id, kwargs in models(quick)]
    return {"episodes": episodes, "max_steps": max_steps, "load_average_1min": os.getloadavg()[0], "results": results}


def markdown(report: dict) -> str:
    lines = [f"{report['episodes']} held-out seeds per run, at most {report['max_steps']} steps, greedy "
             f"(1-minute load average {report['load_average_1min']:.1f} at the end).", "",
             "| model | env | run | episodes/min | generated tokens/s | prompt tokens encoded | won |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for result in report["results"]:
        for r in result["runs"]:
            label = f"B={r['batch']}, {'cache' if r['cache'] else 'no cache'}"
            lines.append(f"| {result['model']} | {result['env']} | {label} | {r['episodes_per_min']} | "
                         f"{r['generated_tokens_per_s']} | {r['prompt_tokens_encoded']} | {r['won']}/{r['episodes']} |")
    lines += ["", "| model | env | batching B=8 (or fewer) / B=1 | cache / no cache (B=1) | prompt tokens encoded, cache / no cache | same actions |",
              "| --- | --- | ---: | ---: | ---: | --- |"]
    lines += [f"| {r['model']} | {r['env']} | {r['batching_speedup']}x | {r['cache_speedup']}x | {r['encoded_token_ratio']} | "
              f"{'yes' if r['same_actions'] else 'no'} |" for r in report["results"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--episodes", type=int, default=None, help="held-out seeds per run (default 2 quick, 16 full)")
    parser.add_argument("--max-steps", type=int, default=None, help="steps per episode (default 3 quick, 10 full)")
    parser.add_argument("--out", default=None, help="also write the report as JSON here")
    args = parser.parse_args()
    report = run(quick=args.quick, episodes=args.episodes, max_steps=args.max_steps)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(report))


if __name__ == "__main__":
    main()
