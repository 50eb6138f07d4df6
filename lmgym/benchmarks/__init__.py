"""Benchmarks: specs, suites, the resumable runner, backends, reports and the perf section.

* `lmgym.benchmarks.spec`: `BenchmarkSpec` (envs, agents, episodes, base seed), YAML/TOML files.
* `lmgym.benchmarks.suites`: ``smoke``, ``default``, ``full``, built from the env registry.
* `lmgym.benchmarks.runner`: `run_benchmark(spec, out, backend=...)`, resumable.
* `lmgym.benchmarks.backends`: in-process, local processes, Ray.
* `lmgym.benchmarks.report`: summary with Wilson intervals, markdown table, plots.
* `lmgym.benchmarks.perf`: steps/s per family, rollouts/s scaling, the families' own scripts.
* `lmgym.benchmarks.cli`: ``lmgym bench``.
* `lmgym.benchmarks.viewer`: ``lmgym view``, runs and rollout files as web pages.
"""
