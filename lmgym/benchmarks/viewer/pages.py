"""The viewer's HTML pages, as pure functions of a `Source` (no web framework here).

Every text that comes from a file (observations, completions, actions, tasks, names, info
values) goes through `esc`; URLs are built with `urlencode` and escaped again as attributes.
A transcript is shown generically: the `Step` and `Episode` fields every rollout has in their
fixed places, and whatever else a step or an episode holds (research agents' tool times,
judge feedback, team messages, the env's info) as name/value tables.
"""

from __future__ import annotations

import html
import json
from typing import Any, Iterable
from urllib.parse import urlencode

from lmgym.benchmarks.report import LOAD_NOTE
from lmgym.benchmarks.viewer.store import OUTCOMES, SORTS, Source, outcome_of

#: `Step` fields the page shows in their own places; every other field a step holds (a field
#: added to `Step` later included) is shown by name in the step's table.
STEP_SHOWN = frozenset({"observation", "action", "reward", "terminated", "truncated", "action_valid", "won",
                        "reasoning", "completion", "spans", "info_json", "agent_json", "prompt_tokens",
                        "completion_tokens", "seconds"})
#: `Episode` fields (and the columns `Episode.to_dict` and the runner add) shown in their places.
EPISODE_SHOWN = frozenset({"env_id", "seed", "task", "agent", "steps", "final_observation", "env_kwargs_json",
                           "seconds", "return", "won", "length", "invalid_actions", "key"})
#: Values longer than this (or with a newline) fold into a <details> element.
INLINE_CHARS = 120
#: Flat objects with at most this many scalar values show as name/value pairs, not JSON.
FLAT_KEYS = 24
#: Rows listed on one episode-list page.
LIST_LIMIT = 1000

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1f2328; background: #f6f8fa; }
header { background: #24292f; color: #fff; padding: 0.6rem 1.2rem; display: flex; gap: 1.4rem; align-items: baseline; }
header a { color: #fff; } header .title { font-weight: 600; }
main { max-width: 96rem; margin: 0 auto; padding: 0.8rem 1.2rem 3rem; }
a { color: #0969da; text-decoration: none; } a:hover { text-decoration: underline; }
table { border-collapse: collapse; background: #fff; margin: 0.5rem 0 1rem; }
th, td { border: 1px solid #d0d7de; padding: 0.25rem 0.55rem; text-align: left; vertical-align: top; }
th { background: #f0f3f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre.action { font-weight: 600; padding: 0.2rem 0.6rem; background: #f6f8fa; }
pre { white-space: pre-wrap; word-break: break-word; margin: 0.2rem 0 0.6rem; padding: 0.45rem 0.6rem;
      background: #fff; border: 1px solid #d0d7de; border-radius: 4px; max-height: 28rem; overflow: auto; }
.badge { display: inline-block; padding: 0 0.5rem; border-radius: 1rem; font-size: 0.85em; font-weight: 600; }
.won, .valid { background: #dafbe1; color: #116329; } .lost, .invalid { background: #ffebe9; color: #a40e26; }
.error { background: #fff1c2; color: #7d4e00; }
.step { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; padding: 0.4rem 0.8rem; margin: 0.7rem 0; }
.step h3 { margin: 0.2rem 0 0.4rem; font-size: 1rem; } .meta { color: #57606a; font-weight: normal; }
.label { font-size: 0.8em; text-transform: uppercase; letter-spacing: 0.04em; color: #57606a; }
mark.reason { background: #ddf4ff; border-bottom: 2px solid #54aeff; }
mark.act { background: #fff8c5; border-bottom: 2px solid #d4a72c; font-weight: 600; }
mark.other { background: #fbefff; border-bottom: 2px solid #c297ff; }
.fields { display: flex; flex-wrap: wrap; gap: 0.3rem; margin: 0.2rem 0 0.6rem; }
.field { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 4px; padding: 0.05rem 0.45rem; }
.field.wide { flex-basis: 100%; } .field pre { max-height: 14rem; margin: 0.2rem 0; }
.sub { margin-right: 0.5rem; white-space: nowrap; }
.field .name { font-family: ui-monospace, monospace; font-size: 0.85em; color: #57606a; }
.field > .name { font-weight: 600; }
.side { display: grid; grid-template-columns: 1fr 1fr; gap: 0.8rem; }
.side > div { min-width: 0; }
form.filters { display: flex; gap: 0.8rem; flex-wrap: wrap; align-items: end; margin: 0.5rem 0; }
form.filters label { display: flex; flex-direction: column; font-size: 0.85em; color: #57606a; }
.note { background: #fff8c5; border: 1px solid #d4a72c; padding: 0.4rem 0.7rem; border-radius: 4px; }
.differ { background: #ffd8b5; font-weight: 600; }
img.plot { max-width: 100%; background: #fff; border: 1px solid #d0d7de; margin: 0.3rem 0.6rem 0.3rem 0; }
"""


# -- small helpers ------------------------------------------------------------------------------
def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def url(path: str, **params: Any) -> str:
    """`path` with the given query parameters (None ones left out), escaped for an attribute."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return esc(f"{path}?{query}" if query else path)


def link(text: Any, path: str, **params: Any) -> str:
    return f'<a href="{url(path, **params)}">{esc(text)}</a>'


def num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return esc(value)
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def badge(outcome: str) -> str:
    return f'<span class="badge {esc(outcome)}">{esc(outcome)}</span>'


#: A table cell: its HTML, or ``(css class, HTML)`` (``"num"`` right-aligns a number).
Cell = str | tuple[str, str]


def _table(header: Iterable[str], rows: Iterable[Iterable[Cell]], css: str = "") -> str:
    """An HTML table from a header and cells that are already HTML."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _cell(cell: Cell) -> str:
    if isinstance(cell, tuple):
        css, content = cell
        return f'<td class="{css}">{content}</td>'
    return f"<td>{cell}</td>"


def value_html(value: Any) -> str:
    """Any JSON value: short scalars inline, a small flat object (metrics) as name/value pairs,
    long text or nested structures folded into <details> under a one-line summary."""
    if value is None or isinstance(value, (bool, int, float)):
        return f"<code>{esc(json.dumps(value))}</code>"
    if isinstance(value, dict) and 0 < len(value) <= FLAT_KEYS and not any(
            isinstance(v, (dict, list)) for v in value.values()):
        return " ".join(f'<span class="sub"><span class="name">{esc(k)}</span> {value_html(v)}</span>'
                        for k, v in sorted(value.items()))
    if isinstance(value, str):
        text, summary = value, value.strip().split("\n", 1)[0][:80] + "\u2026"
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
        if len(text) <= INLINE_CHARS:
            return f"<code>{esc(text)}</code>"
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)
        summary = (f"{{{', '.join(sorted(map(str, value))[:8])}{', ...' if len(value) > 8 else ''}}}"
                   if isinstance(value, dict) else f"[{len(value)} items]")
    if len(text) <= INLINE_CHARS and "\n" not in text:
        return esc(text)
    return f"<details><summary>{esc(summary)} ({len(text):,} chars)</summary><pre>{esc(text)}</pre></details>"


def select(name: str, options: list[str], chosen: str | None, any_label: str | None = None) -> str:
    """A labelled <select> of a GET form; `any_label` adds an empty first choice (no filter)."""
    items = ([f'<option value="">{esc(any_label)}</option>'] if any_label else []) + [
        f'<option value="{esc(o)}"{" selected" if o == chosen else ""}>{esc(o)}</option>' for o in options]
    return f'<label>{esc(name)}<select name="{esc(name)}">{"".join(items)}</select></label>'


def fields_table(title: str, items: list[tuple[str, Any]]) -> str:
    """Name/value pairs, short ones side by side, long ones on a line of their own."""
    if not items:
        return ""
    cells = []
    for name, value in items:
        shown = value_html(_decoded(name, value))
        wide = " wide" if shown.startswith("<details>") else ""
        cells.append(f'<div class="field{wide}"><span class="name">{esc(name)}</span> {shown}</div>')
    return f'<div class="label">{esc(title)}</div><div class="fields">{"".join(cells)}</div>'


def _decoded(name: str, value: Any) -> Any:
    """A ``*_json`` text field (the rollout format's way to keep columns typed) as its JSON value."""
    if name.endswith("_json") and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            pass
    return value


def highlight(completion: str, spans: Any) -> str:
    """The completion, escaped, with its [reason]/[act] character spans marked.

    Spans are ``{"kind", "start", "end"}`` character offsets (`lmgym.rollouts.Span`); ones that
    are malformed, out of range or overlap an earlier span are left unmarked.
    """
    marks, position = [], 0
    valid = [s for s in spans if isinstance(s, dict) and isinstance(s.get("start"), int)
             and isinstance(s.get("end"), int)] if isinstance(spans, list) else []
    for span in sorted(valid, key=lambda s: (s["start"], s["end"])):
        start, end = max(span["start"], position), min(span["end"], len(completion))
        if start >= end or span["start"] < position:
            continue
        kind = str(span.get("kind", ""))
        css = kind if kind in ("reason", "act") else "other"
        marks.append(esc(completion[position:start]))
        marks.append(f'<mark class="{css}" title="{esc(kind)}">{esc(completion[start:end])}</mark>')
        position = end
    marks.append(esc(completion[position:]))
    return "".join(marks)


def page(source: Source, title: str, body: str) -> str:
    notes = "".join(f'<p class="note">{esc(note)}</p>' for note in source.notes)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)} - lmgym view</title><style>{STYLE}</style></head><body>"
            f'<header><span class="title">lmgym view</span>{link(source.title, "/")}'
            f'{link("episodes", "/episodes")}{link("compare", "/compare")}'
            f'<span class="meta">{esc(source.path)}</span></header>'
            f"<main>{notes}{body}</main></body></html>")


def error_page(status: int, message: str) -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{status}</title>'
            f"<style>{STYLE}</style></head><body><main><h1>{status}</h1><p>{esc(message)}</p>"
            f'<p><a href="/">Back to the summary</a></p></main></body></html>')


# -- the run ----------------------------------------------------------------------------------
def run_page(source: Source) -> str:
    """The summary table (every cell links to its episodes), progress, paired links and plots."""
    summary = source.summary()
    header = ["env", "agent", "episodes", "success (95% CI)", "mean return", "score", "mean steps",
              "invalid-action rate", "format-error rate", "tokens/episode (prompt + completion)", "s/episode", "errors"]
    rows = []
    for c in summary["cells"]:
        def cell(text: str, css: str = "num", **filters: Any) -> Cell:
            """A cell linking to the episodes of this env and agent (`filters` narrow them)."""
            return css, f'<a href="{url("/episodes", env=c["env"], agent=c["agent"], **filters)}">{text}</a>'

        success = "-" if c["success_rate"] is None else (
            f"{c['success_rate']:.2f} [{c['success_ci95'][0]:.2f}, {c['success_ci95'][1]:.2f}]")
        tokens = ("-" if c["episodes"] == 0 else
                  f"{num(c.get('prompt_tokens_per_episode'), 1)} + {num(c.get('completion_tokens_per_episode'), 1)}")
        expected = ("" if source.expected_episodes() is None or c["episodes"] == c["expected_episodes"]
                    else f"/{c['expected_episodes']}")
        rows.append([
            cell(esc(c["env"]), ""), cell(esc(c["agent"]), ""), cell(f"{c['episodes']}{expected}"),
            cell(success, "", outcome="won"), cell(num(c["mean_return"])), cell(num(c["mean_score"])),
            cell(num(c["mean_steps"], 1)), cell(num(c["invalid_action_rate"])),
            cell(num(c.get("format_error_rate"))), cell(tokens),
            cell(num(c["seconds_per_episode"], 3)), cell(str(c["errors"]), outcome="error" if c["errors"] else None),
        ])
    kind = "Benchmark" if source.kind == "run" else "Rollout file"
    parts = [f"<h1>{kind} <code>{esc(source.title)}</code></h1>", _progress(source),
             _table(header, rows, "summary")]
    parts.append(_paired_links(source))
    parts += [f'<img class="plot" src="{url("/files/" + name)}" alt="{esc(name)}">' for name in source.plots()]
    if summary.get("notes"):
        parts.append("<h3>Left out</h3><ul>" + "".join(f"<li>{esc(n)}</li>" for n in summary["notes"]) + "</ul>")
    parts.append(f'<p class="meta">{esc(LOAD_NOTE)}</p>')
    return page(source, source.title, "".join(parts))


def _progress(source: Source) -> str:
    expected, written = source.expected_episodes(), len(source.rows)
    if expected is None:
        return f"<p>{written} episodes.</p>"
    if written >= expected:
        return f"<p>All {expected} episodes written.</p>"
    return (f'<p class="note">{written} of {expected} episodes written: the run is in progress or was '
            "interrupted (reload to see new episodes; rerunning the same command resumes it).</p>")


def _paired_links(source: Source) -> str:
    links = []
    for env in source.envs():
        agents = source.agents(env)
        for i, first in enumerate(agents):
            links += [f"<li>{link(f'{first} vs {second} on {env}', '/compare', env=env, a=first, b=second)}</li>"
                      for second in agents[i + 1:]]
    return "<h3>Paired comparisons (same env, same seeds)</h3><ul>" + "".join(links) + "</ul>" if links else ""


# -- the episode list -------------------------------------------------------------------------
def episodes_page(source: Source, *, env: str | None, agent: str | None, outcome: str | None, seed: str | None,
                  sort: str, descending: bool) -> str:
    rows = source.select(env=env, agent=agent, outcome=outcome, seed=seed, sort=sort, descending=descending)

    form = ('<form class="filters" method="get" action="/episodes">'
            + select("env", source.envs(), env, "any") + select("agent", source.agents(), agent, "any")
            + select("outcome", list(OUTCOMES), outcome, "any")
            + f'<label>seed<input name="seed" size="8" value="{esc(seed or "")}"></label>'
            + select("sort", list(SORTS), sort)
            + select("order", ["ascending", "descending"], "descending" if descending else "ascending")
            + '<button type="submit">Show</button></form>')
    header = ["episode", "env", "agent", "seed", "outcome", "return", "score", "steps", "invalid", "tokens",
              "seconds", "task"]
    table_rows = [[
        ("num", link(r["episode"], "/episode", key=r["key"])), esc(r["env"]), esc(r["agent"]),
        ("num", esc(r["seed"])), badge(outcome_of(r)), ("num", num(r.get("return"))), ("num", num(r.get("score"))),
        ("num", num(r.get("steps"))), ("num", num(r.get("invalid_actions"))),
        ("num", num((r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0))),
        ("num", num(r.get("seconds"), 3)), esc(_shorten(r.get("task") or "", 90)),
    ] for r in rows[:LIST_LIMIT]]
    shown = f"{len(rows)} episodes" + (f" (the first {LIST_LIMIT} shown; filter to see others)"
                                       if len(rows) > LIST_LIMIT else "")
    body = f"<h1>Episodes</h1>{form}<p>{shown}</p>{_table(header, table_rows, 'episodes')}"
    return page(source, "episodes", body)


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


# -- one episode ------------------------------------------------------------------------------
def step_html(step: dict[str, Any], number: int, task: str) -> str:
    """One step: observation, completion with its spans marked, action, reward, validity, and
    every other field the step holds (its info included)."""
    valid = step.get("action_valid", True)
    meta = [f"reward {num(step.get('reward'), 3)}",
            f"{num(step.get('prompt_tokens', 0))} + {num(step.get('completion_tokens', 0))} tokens",
            f"{num(step.get('seconds'), 3)} s"]
    ends = [name for name in ("terminated", "truncated") if step.get(name)]
    parts = [f'<section class="step" id="step-{number}"><h3>Step {number} '
             f'<span class="badge {"valid" if valid else "invalid"}">{"valid" if valid else "invalid"}</span> '
             + (badge("won") + " " if step.get("won") else "")
             + f'<span class="meta">{esc(" · ".join(meta + ends))}</span></h3>',
             f'<div class="label">observation</div><pre class="observation">{esc(step.get("observation", ""))}</pre>']
    completion = str(step.get("completion") or "")
    if completion:
        parts.append('<div class="label">completion (<mark class="reason">reason</mark> '
                     '<mark class="act">act</mark>)</div>'
                     f'<pre class="completion">{highlight(completion, step.get("spans"))}</pre>')
    reasoning = str(step.get("reasoning") or "")
    if reasoning and reasoning not in completion:
        parts.append(f'<div class="label">reasoning</div><pre class="reasoning">{esc(reasoning)}</pre>')
    parts.append(f'<div class="label">action</div><pre class="action">{esc(step.get("action", ""))}</pre>')
    parts.append(fields_table("step fields", [(k, v) for k, v in sorted(step.items()) if k not in STEP_SHOWN]))
    parts.append(fields_table("agent", _json_items(step.get("agent_json"), "agent_json")))
    parts.append(fields_table("info after the step", [(k, v) for k, v in _json_items(step.get("info_json"), "info_json")
                                                      if not (k == "task" and v == task)]))
    return "".join(parts) + "</section>"


def _json_items(text: Any, name: str) -> list[tuple[str, Any]]:
    """A JSON-object column (``info_json``, ``agent_json``) as sorted (name, value) pairs; text
    that is not a JSON object is shown whole under the column's `name`."""
    value = _decoded(name, text) if text else {}
    return sorted(value.items()) if isinstance(value, dict) else [(name, value)]


def _outcome_line(row: dict[str, Any]) -> str:
    tokens = (row.get("prompt_tokens") or 0) + (row.get("completion_tokens") or 0)
    facts = [f"return {num(row.get('return'))}"] + (
        [] if row.get("score") is None else [f"score {num(row['score'])}"]) + [
        f"{num(row.get('steps'))} steps", f"{num(row.get('invalid_actions'))} invalid", f"{tokens} tokens",
        f"{num(row.get('seconds'), 3)} s"]
    return f'{badge(outcome_of(row))} <span class="meta">{esc(" · ".join(facts))}</span>'


def episode_page(source: Source, row: dict[str, Any]) -> str:
    transcript = source.transcript(row["key"])
    seed = str(row["seed"])
    title = f"{row['agent']} on {row['env']}, seed {seed}"
    parts = [f"<h1>{esc(title)}</h1>", f"<p>{_outcome_line(row)}</p>", _neighbours(source, row)]
    others = [a for a in source.paired(row["env"], seed) if a != row["agent"]]
    if others:
        parts.append("<p>Same env and seed: " + ", ".join(
            link(f"{row['agent']} vs {other}", "/compare", env=row["env"], a=row["agent"], b=other, seed=seed)
            for other in others) + "</p>")
    if row.get("error"):
        parts.append(f'<div class="label">error</div><pre class="error">{esc(row["error"])}</pre>')
    if transcript is None:
        if row.get("error"):
            why = "this episode raised before it finished"
        elif "transcript" not in row:
            why = "this run was written by an lmgym that kept no transcripts"
        elif row["transcript"] is None:
            why = "the run was made with --no-transcripts"
        else:
            why = f"{row['transcript']} holds no line with this key (was the file removed or cut?)"
        parts.append(f'<p class="note">No transcript: {esc(why)}.</p>')
        return page(source, title, "".join(parts))
    task = str(transcript.get("task", ""))
    parts.append(f'<div class="label">task</div><pre class="task">{esc(task)}</pre>')
    extras = [(k, v) for k, v in sorted(transcript.items()) if k not in EPISODE_SHOWN]
    if transcript.get("env_kwargs_json") not in (None, "{}"):
        extras.append(("env_kwargs_json", transcript["env_kwargs_json"]))
    parts.append(fields_table("episode fields", extras))
    steps = transcript.get("steps") or []
    parts += [step_html(step, i + 1, task) for i, step in enumerate(steps) if isinstance(step, dict)]
    if transcript.get("final_observation"):
        parts.append('<div class="label">final observation</div>'
                     f'<pre class="observation">{esc(transcript["final_observation"])}</pre>')
    return page(source, title, "".join(parts))


def _neighbours(source: Source, row: dict[str, Any]) -> str:
    """Links to the previous and next episode of the same agent on the same env."""
    same = source.select(env=row["env"], agent=row["agent"])
    index = next(i for i, r in enumerate(same) if r["key"] == row["key"])
    links = [link("\u2190 previous episode", "/episode", key=same[index - 1]["key"]) if index > 0 else "",
             link(f"all of {row['agent']} on {row['env']}", "/episodes", env=row["env"], agent=row["agent"]),
             link("next episode \u2192", "/episode", key=same[index + 1]["key"]) if index + 1 < len(same) else ""]
    return "<p>" + " | ".join(part for part in links if part) + "</p>"


# -- two agents side by side ------------------------------------------------------------------
def compare_form(source: Source, env: str | None, first: str | None, second: str | None) -> str:
    agents = source.agents(env)
    return ('<form class="filters" method="get" action="/compare">' + select("env", source.envs(), env)
            + select("a", agents, first) + select("b", agents, second)
            + '<button type="submit">Compare</button></form>')


def pairs_page(source: Source, env: str, first: str, second: str) -> str:
    """Every seed both agents played on `env`: outcomes side by side, with the paired counts."""
    pairs = source.pairs(env, first, second)
    both = [(seed, a, b) for seed, a, b in pairs if a is not None and b is not None]
    names = {(True, True): "both won", (True, False): f"only {first} won",
             (False, True): f"only {second} won", (False, False): "neither won"}
    counts = dict.fromkeys(names.values(), 0)
    for _, a, b in both:
        counts[names[bool(a["won"]), bool(b["won"])]] += 1

    def side(row: dict | None) -> list:
        if row is None:
            return ["-", ("num", "-"), ("num", "-")]
        return [badge(outcome_of(row)) + " " + link("open", "/episode", key=row["key"]),
                ("num", num(row.get("return"))), ("num", num(row.get("steps")))]

    rows = [[("num differ" if a and b and a["won"] != b["won"] else "num", esc(seed)), *side(a), *side(b),
             link("side by side", "/compare", env=env, a=first, b=second, seed=seed) if a and b else "-"]
            for seed, a, b in pairs]
    header = ["seed", esc(first), "return", "steps", esc(second), "return", "steps", ""]
    body = (f"<h1>{esc(first)} vs {esc(second)} on {esc(env)}</h1>{compare_form(source, env, first, second)}"
            f"<p>{len(both)} paired episodes (same env, same seed): "
            + esc("; ".join(f"{name}: {count}" for name, count in counts.items()))
            + '. Seeds where only one of them won are <span class="differ">marked</span>.</p>'
            + _table(header, rows, "pairs"))
    return page(source, f"{first} vs {second}", body)


def side_by_side_page(source: Source, env: str, first: dict[str, Any], second: dict[str, Any]) -> str:
    """The two episodes step by step, step k of one beside step k of the other."""
    seed = str(first["seed"])
    title = f"{first['agent']} vs {second['agent']} on {env}, seed {seed}"
    transcripts = [source.transcript(first["key"]), source.transcript(second["key"])]
    columns = []
    for row, transcript in zip((first, second), transcripts):
        head = (f"<h2>{link(row['agent'], '/episode', key=row['key'])}</h2><p>{_outcome_line(row)}</p>")
        if transcript is None:
            columns.append([head + '<p class="note">No transcript recorded.</p>'])
            continue
        task = str(transcript.get("task", ""))
        steps = [s for s in transcript.get("steps") or [] if isinstance(s, dict)]
        columns.append([head + f'<div class="label">task</div><pre class="task">{esc(task)}</pre>']
                       + [step_html(step, i + 1, task) for i, step in enumerate(steps)])
    depth = max(len(c) for c in columns)
    cells = "".join(f"<div>{column[i] if i < len(column) else ''}</div>" for i in range(depth) for column in columns)
    body = (f"<h1>{esc(title)}</h1>"
            f"<p>{link('all seeds of this pair', '/compare', env=env, a=first['agent'], b=second['agent'])}</p>"
            f'<div class="side">{cells}</div>')
    return page(source, title, body)
