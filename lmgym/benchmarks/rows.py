"""A benchmark row: one episode's line of ``episodes.jsonl``, the one schema every executor
writes (`lmgym.benchmarks.backends`) and the report and the viewer read.

A row names its job (`Job`: env k, agent k, episode k of the spec; ``key`` ``env|agent|k``,
what resume compares), where the episode ran (``seed``, ``task_index``), the episode's outcome
computed from its rollout alone (`episode_columns`), ``seconds``, ``error`` (None, or what the
env or agent raised: then the outcome is an empty episode's, `job_row`), ``transcript``
(the run-folder file that holds its rollout), ``panel`` (the hash of its env's panel,
`lmgym.benchmarks.panels`) and ``contaminated`` (its agent's checkpoint trained on a task of that
panel: True, False, or None when unknown), the last three set by the runner. Rows are a function of the
spec: re-running gives identical rows apart from ``seconds``.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from typing import Any, TypedDict

from lmgym.benchmarks.spec import BenchmarkSpec


@dataclass(frozen=True)
class Job:
    env: int  # index into spec.envs
    agent: int  # index into spec.agents
    episode: int  # k: seed base_seed + k, and task k when the env sweeps


def job_key(spec: BenchmarkSpec, job: Job) -> str:
    """The identity of a row: resume and de-duplication compare these."""
    return f"{spec.envs[job.env].name}|{spec.agents[job.agent].name}|{job.episode}"


def all_jobs(spec: BenchmarkSpec) -> list[Job]:
    """Every episode of the spec, env by env, episode by episode, agent by agent."""
    return [Job(e, a, k) for e, env in enumerate(spec.envs) for k in range(spec.episodes_in(env))
            for a, agent in enumerate(spec.agents) if spec.plays(env, agent)]


#: Task metrics a row copies from the episode's last info, where the env reports them:
#: ``score`` (WebShop's purchase reward, HotPotQA's F1, PromptEdit's reward) and HotPotQA's ``em``,
#: ``f1`` and ``cover_em``.
SCORE_KEYS = ("score", "em", "f1", "cover_em")

#: The columns of a row (``return`` is a Python keyword, hence the functional form).
Row = TypedDict("Row", {
    "key": str, "env": str, "env_id": str, "agent": str, "episode": int, "seed": "int | None",
    "task_index": "int | None",
    # the outcome, from the rollout (`episode_columns`)
    "task": str, "return": float, "won": bool, "steps": int, "invalid_actions": int, "truncated": bool,
    "prompt_tokens": int, "completion_tokens": int, "format_errors": int,
    "score": "float | None", "em": "float | None", "f1": "float | None", "cover_em": "float | None",
    "seconds": float, "error": "str | None", "transcript": "str | None",
    "panel": "str | None", "contaminated": "bool | None",
})

#: The key under which an executor returns a row's rollout (`Episode.to_dict()`) beside it; the
#: runner takes it out and writes it to the transcripts file before the row is written.
ROLLOUT_FIELD = "rollout"


def _final_scores(info_json: str) -> dict[str, float | None]:
    info = json.loads(info_json)
    return {key: float(info[key]) if isinstance(info.get(key), (int, float)) and not isinstance(info.get(key), bool)
            else None for key in SCORE_KEYS}


def episode_columns(rollout: dict[str, Any]) -> dict[str, Any]:
    """The outcome columns of one episode in the rollout format (`lmgym.rollouts.Episode.to_dict`).

    Computed from the steps alone (missing step fields take their `Step` defaults), so a
    rollout file written by any lmgym agent or wrapper summarises like a benchmark row; ``{}``
    gives an empty episode's (an error row's).
    """
    steps = rollout.get("steps") or []
    last = steps[-1] if steps else {}
    return {
        "task": rollout.get("task", ""), "return": float(sum(s.get("reward", 0.0) for s in steps)),
        "won": bool(last.get("won", False)), "steps": len(steps),
        "invalid_actions": sum(not s.get("action_valid", True) for s in steps),
        "truncated": bool(last.get("truncated", False)),
        "prompt_tokens": sum(s.get("prompt_tokens", 0) for s in steps),
        "completion_tokens": sum(s.get("completion_tokens", 0) for s in steps),
        "format_errors": sum(bool(json.loads(s.get("agent_json") or "{}").get("format_error")) for s in steps),
        **_final_scores(last.get("info_json", "{}")),
    }


def make_row(*, key: str, env: str, env_id: str, agent: str, episode: int, seed: int | None,
             task_index: int | None, rollout: dict[str, Any] | None, seconds: float, error: str | None = None,
             transcript: str | None = None, panel: str | None = None, contaminated: bool | None = None) -> Row:
    """A row of every column; the outcome from `rollout` (an empty episode's when None)."""
    return Row(key=key, env=env, env_id=env_id, agent=agent, episode=episode, seed=seed, task_index=task_index,
               **episode_columns(rollout or {}), seconds=round(seconds, 6), error=error, transcript=transcript,
               panel=panel, contaminated=contaminated)


def job_row(spec: BenchmarkSpec, job: Job, rollout: dict[str, Any] | None, seconds: float,
            error: BaseException | None = None) -> Row:
    """The row of `job`: its episode's (`rollout`), or, when the env or agent raised `error`, an
    error row (called inside the ``except`` block: the traceback's last frames are kept)."""
    env, agent = spec.envs[job.env], spec.agents[job.agent]
    text = None if error is None else f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-3)}"
    return make_row(key=job_key(spec, job), env=env.name, env_id=env.id, agent=agent.name, episode=job.episode,
                    seed=spec.seed(job.episode), task_index=job.episode if env.sweep else None, rollout=rollout,
                    seconds=seconds, error=text)
