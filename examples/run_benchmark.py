"""Run a benchmark from Python: declare a spec, run it resumably, read the summary.

Every agent plays episode k of every env with seed base_seed + k (paired comparison); rows are
appended to OUT/episodes.jsonl as episodes finish, so running this again with the same --out
finishes an interrupted run instead of starting over.

    python examples/run_benchmark.py --episodes 50 --backend processes --out bench-out/example

Smoke test: --episodes 2 --out {tmp}/bench
"""

from __future__ import annotations

import argparse

from lmgym.benchmarks.report import summary_markdown
from lmgym.benchmarks.runner import run_benchmark
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--episodes", type=int, default=20, help="episodes per env and agent")
parser.add_argument("--backend", choices=("inprocess", "processes", "ray"), default="inprocess")
parser.add_argument("--out", default="bench-out/example", help="results folder (rerun to resume)")


def main() -> None:
    args = parser.parse_args()

    # ---- the spec: which envs, which agents, how many paired episodes ------------------------
    spec = BenchmarkSpec(
        id="example",
        envs=(
            EnvSpec("lmgym/KeyDoor-v0"),
            EnvSpec("lmgym/KeyDoor-v0", kwargs={"size": 3, "num_distractors": 2}, label="KeyDoor 3x3"),
        ),
        agents=(
            AgentSpec("random"),
            AgentSpec("expert"),
            # Any Agent subclass plugs in by path, with kwargs:
            # AgentSpec("my-agent", kind="my_package.agents:MyAgent", kwargs={"temperature": 0.0}),
        ),
        episodes=args.episodes,
        base_seed=0,
    )

    # ---- run: rows to OUT/episodes.jsonl; summary.json/.md and plots beside them --------------
    summary = run_benchmark(spec, args.out, backend=args.backend, quiet=True)

    # ---- read the results -------------------------------------------------------------------
    print(summary_markdown(summary))
    for cell in summary["cells"]:
        low, high = cell["success_ci95"]
        print(f"{cell['env']:>20} {cell['agent']:>7}: success {cell['success_rate']:.2f} (95% CI {low:.2f}-{high:.2f})")


if __name__ == "__main__":  # the processes backend spawns workers that import this file
    main()
