"""`lmgym view`: a run folder or a rollout file as pages; escaping, 404s, growing files, the CLI."""

import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from html import unescape
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from lmgym.agents.base import Decision, ExpertAgent  # noqa: E402
from lmgym.benchmarks.runner import TRANSCRIPTS_FILE, run_benchmark  # noqa: E402
from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec  # noqa: E402
from lmgym.benchmarks.viewer.app import create_app, listen  # noqa: E402
from lmgym.benchmarks.viewer.pages import EPISODE_SHOWN, STEP_SHOWN, highlight  # noqa: E402
from lmgym.benchmarks.viewer.store import ViewerError, open_source  # noqa: E402
from lmgym.cli import main as lmgym_main  # noqa: E402
from lmgym.rollouts import Episode, Span, Step  # noqa: E402

SPEC = BenchmarkSpec("view", (EnvSpec("lmgym/KeyDoor-v0"),), (AgentSpec("random"), AgentSpec("expert")),
                     episodes=3, base_seed=0)
HOSTILE = "<script>window.pwned = 1</script>"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    run_benchmark(SPEC, out, quiet=True)
    return out


def client_for(path) -> TestClient:
    return TestClient(create_app(open_source(path)))


def links(page: str, prefix: str) -> list[str]:
    return [unescape(href) for href in re.findall(r'href="([^"]+)"', page) if unescape(href).startswith(prefix)]


def test_summary_links_to_episodes_and_each_episode_shows_its_steps(run_dir):
    client = client_for(run_dir)
    summary = client.get("/")
    assert summary.status_code == 200 and "All 6 episodes written." in summary.text
    assert "1.00 [0.44, 1.00]" in summary.text  # the expert's 3/3 with its Wilson interval
    cell_links = links(summary.text, "/episodes?")
    assert "/episodes?env=lmgym%2FKeyDoor-v0&agent=expert" in cell_links
    assert '<img class="plot" src="/files/success.png"' in summary.text

    listing = client.get("/episodes", params={"env": "lmgym/KeyDoor-v0", "agent": "expert"})
    episode_links = links(listing.text, "/episode?key=")
    assert len(episode_links) == 3 and "3 episodes" in listing.text

    episode = client.get(episode_links[0])
    transcript = open_source(run_dir).transcript("lmgym/KeyDoor-v0|expert|0")
    assert episode.status_code == 200
    assert episode.text.count('<section class="step"') == len(transcript["steps"])
    first = transcript["steps"][0]
    assert f'<mark class="act" title="act">{first["action"]}</mark>' in episode.text
    assert json.loads(first["info_json"])["expert_reasoning"] in episode.text  # the info, shown
    # The paired episode of the other agent is one click away.
    [pair] = links(episode.text, "/compare?")
    side_by_side = client.get(pair)
    assert side_by_side.status_code == 200 and "expert vs random" in side_by_side.text
    assert side_by_side.text.count('<section class="step"') > len(transcript["steps"])
    assert client.get("/files/success.png").headers["content-type"] == "image/png"


def test_episode_list_filters_and_sorts(run_dir):
    source = open_source(run_dir)
    won = source.select(outcome="won")
    assert won and all(r["won"] for r in won)
    assert {r["seed"] for r in source.select(seed="2")} == {2}
    by_steps = source.select(agent="random", sort="steps", descending=True)
    assert [r["steps"] for r in by_steps] == sorted((r["steps"] for r in by_steps), reverse=True)
    page = client_for(run_dir).get("/episodes", params={"outcome": "lost", "sort": "return"})
    assert page.status_code == 200 and "badge won" not in page.text


def test_pairs_page_counts_the_paired_outcomes(run_dir):
    source = open_source(run_dir)
    rows = {(r["agent"], r["seed"]): r["won"] for r in source.rows}
    only_expert = sum(rows["expert", s] and not rows["random", s] for s in range(3))
    page = client_for(run_dir).get("/compare", params={"env": "lmgym/KeyDoor-v0", "a": "random", "b": "expert"})
    assert f"only expert won: {only_expert}" in page.text
    assert len(links(page.text, "/compare?env=")) == 3  # one side-by-side link per seed


@pytest.mark.parametrize("path", [
    "/episode?key=nope", "/episode", "/files/spec.json", "/files/..%2Fspec.json", "/files/%2E%2E%2Fepisodes.jsonl",
    "/compare?env=nope", "/compare?env=lmgym/KeyDoor-v0&a=random&b=nobody",
    "/compare?env=lmgym/KeyDoor-v0&a=random&b=expert&seed=99", "/no/such/page",
])
def test_bad_ids_and_paths_are_404_pages(run_dir, path):
    response = client_for(run_dir).get(path)
    assert response.status_code == 404
    assert "<h1>404</h1>" in response.text and "Traceback" not in response.text


def hostile_rollout() -> dict:
    """A rollout as a research agent might write it: markup in every text, and step fields
    no family defines (tool timings, judge metrics and feedback, team messages)."""
    completion = f"Thought: look {HOSTILE}\nAction: search[<b>x</b>]"
    step = {
        "observation": f"Page says {HOSTILE}", "action": "search[<b>x</b>]", "reward": 0.5, "terminated": True,
        "truncated": False, "action_valid": False, "won": False, "reasoning": f"look {HOSTILE}",
        "completion": completion,
        "spans": [{"kind": "reason", "start": 9, "end": 9 + len(f"look {HOSTILE}")},
                  {"kind": "act", "start": completion.index("search"), "end": len(completion)}],
        "info_json": json.dumps({"judge": {"validity": 0.75, "feedback": f"too short {HOSTILE}"},
                                 "task": "the <i>task</i>"}),
        "prompt_tokens": 12, "completion_tokens": 7, "seconds": 0.25,
        "tool_calls": [{"name": "search", "dispatched_s": 0.05, "returned_s": 0.21}],
        "judge_json": json.dumps({"diversity": 0.4125, "note": f"{HOSTILE}"}),
        "team_messages": [{"from": "planner", "text": f"try {HOSTILE}"}],
    }
    return {"env_id": "lmgym/HotPotQA-Gen-v0", "seed": 5, "task": "the <i>task</i>", "agent": "<u>team</u>",
            "steps": [step], "final_observation": "done", "env_kwargs_json": "{}", "team_size": 3}


def test_a_rollout_file_shows_whatever_a_step_holds_escaped(tmp_path):
    path = tmp_path / "research.jsonl"
    path.write_text(json.dumps(hostile_rollout()) + "\n")
    client = client_for(path)
    summary = client.get("/")
    assert summary.status_code == 200 and "Rollout file" in summary.text
    [episode_link] = links(client.get("/episodes").text, "/episode?key=")
    page = client.get(episode_link).text
    assert "<script>" not in page and "<b>x</b>" not in page and "<u>team</u>" not in page
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in page
    for name in ("tool_calls", "dispatched_s", "team_messages", "planner", "judge", "validity", "team_size"):
        assert name in page, name
    # A *_json field is shown as its JSON value; a flat object of scalars as name/value pairs.
    assert '<span class="name">diversity</span> <code>0.4125</code>' in page
    assert '<mark class="act" title="act">search[&lt;b&gt;x&lt;/b&gt;]</mark>' in page
    assert "12 + 7 tokens" in page and 'class="badge invalid"' in page


def test_the_fields_shown_in_place_are_the_rollout_formats():
    """Every other field is listed by name, so a field added to Step or Episode still shows."""
    assert STEP_SHOWN <= {f.name for f in dataclasses.fields(Step)}
    assert EPISODE_SHOWN - {"return", "won", "length", "invalid_actions", "key"} <= {
        f.name for f in dataclasses.fields(Episode)}


def test_a_page_that_fails_is_a_one_line_500(run_dir):
    source = open_source(run_dir)

    def broken(key):
        raise OSError("disk gone")

    source.transcript = broken
    response = TestClient(create_app(source), raise_server_exceptions=False).get(
        "/episode", params={"key": "lmgym/KeyDoor-v0|expert|0"})
    assert response.status_code == 500 and "OSError: disk gone" in response.text
    assert "Traceback" not in response.text and 'File "' not in response.text


def test_highlight_marks_spans_and_leaves_bad_ones_unmarked():
    text = "Thought: a<b\nAction: go"
    spans = [Span("reason", 9, 12).__dict__, Span("act", 21, 23).__dict__]
    assert highlight(text, spans) == ('Thought: <mark class="reason" title="reason">a&lt;b</mark>\nAction: '
                                      '<mark class="act" title="act">go</mark>')
    bad = [{"kind": "act", "start": 5, "end": 99}, {"kind": "reason", "start": 2, "end": 8}, {"start": "x"}, 7]
    marked = highlight(text, bad)
    assert unescape(re.sub(r"<[^>]+>", "", marked)) == text  # every character shown once, in order
    assert marked.count("<mark") == 1  # the overlapping and malformed spans are skipped


def test_a_run_being_written_is_viewable(tmp_path):
    run_benchmark(SPEC, tmp_path, quiet=True, plots=False)
    rows = (tmp_path / "episodes.jsonl").read_text().splitlines(keepends=True)
    transcripts = (tmp_path / TRANSCRIPTS_FILE).read_text().splitlines(keepends=True)
    # Rewind to 4 finished episodes, with the fifth half-appended to both files.
    (tmp_path / "episodes.jsonl").write_text("".join(rows[:4]) + rows[4][:40])
    (tmp_path / TRANSCRIPTS_FILE).write_text("".join(transcripts[:4]) + transcripts[4][:100])
    source = open_source(tmp_path)
    client = TestClient(create_app(source))
    page = client.get("/").text
    assert "4 of 6 episodes written" in page
    fifth = json.loads(rows[4])["key"]
    assert client.get("/episode", params={"key": fifth}).status_code == 404
    # The writers finish their lines; the next request sees the episode.
    with open(tmp_path / TRANSCRIPTS_FILE, "a") as f:
        f.write(transcripts[4][100:])
    with open(tmp_path / "episodes.jsonl", "a") as f:
        f.write(rows[4][40:])
    episode = client.get("/episode", params={"key": fifth})
    assert episode.status_code == 200 and "No transcript" not in episode.text
    assert "5 of 6 episodes written" in client.get("/").text


def test_the_last_transcript_of_a_key_is_its_rows(tmp_path):
    """A crash between a transcript and its row reruns the episode: its second transcript counts."""
    run_benchmark(SPEC, tmp_path, quiet=True, plots=False)
    key = "lmgym/KeyDoor-v0|expert|1"
    lines = (tmp_path / TRANSCRIPTS_FILE).read_text().splitlines()
    original = next(json.loads(line) for line in lines if json.loads(line)["key"] == key)
    stale = {**original, "final_observation": "a stale transcript"}
    (tmp_path / TRANSCRIPTS_FILE).write_text(json.dumps(stale) + "\n" + "\n".join(lines) + "\n")
    assert open_source(tmp_path).transcript(key)["final_observation"] == original["final_observation"]


def test_a_rollout_file_from_lmgym_rollout(tmp_path):
    path = tmp_path / "expert.jsonl"
    assert lmgym_main(["rollout", "lmgym/KeyDoor-v0", "--agent", "expert", "--episodes", "2", "--out", str(path),
                       "--quiet"]) == 0
    source = open_source(path)
    assert [(r["agent"], r["episode"], r["seed"], r["won"]) for r in source.rows] == [
        ("expert", 0, 0, True), ("expert", 1, 1, True)]
    [cell] = source.summary()["cells"]
    assert cell["success_rate"] == 1.0 and cell["episodes"] == 2
    client = TestClient(create_app(source))
    key = source.rows[1]["key"]
    assert ExpertAgent.name in client.get("/episode", params={"key": key}).text


def test_bad_paths_are_one_line_errors(tmp_path, capsys):
    (tmp_path / "notes.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "runs" / "one").mkdir(parents=True)
    (tmp_path / "runs" / "one" / "spec.json").write_text(SPEC.to_json())
    for path, message in [(tmp_path / "missing", "does not exist"),
                          (tmp_path / "notes.jsonl", "holds no episode in the rollout format"),
                          (tmp_path / "runs", "it holds the runs one")]:
        with pytest.raises(ViewerError, match=message):
            open_source(path)
        with pytest.raises(SystemExit) as exit_:
            lmgym_main(["view", str(path)])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err


@contextlib.contextmanager
def lmgym_view(path):
    """Run ``lmgym view PATH --port 0`` as a user would; yield the URL it prints."""
    process = subprocess.Popen([sys.executable, "-m", "lmgym", "view", str(path), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        line = process.stdout.readline()
        match = re.search(r" on (http://127\.0\.0\.1:\d+/) ", line)
        assert match, (line, process.stderr.read() if process.poll() is not None else "")
        deadline = time.monotonic() + 30
        while True:  # the URL is printed just before uvicorn starts answering
            try:
                httpx.get(match.group(1))
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "the viewer did not answer"
                time.sleep(0.1)
        yield match.group(1)
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_a_taken_port_is_a_one_line_error():
    taken = listen("127.0.0.1", 0)
    try:
        with pytest.raises(ViewerError, match=r"cannot listen on 127\.0\.0\.1:\d+ .*try another --host or --port"):
            listen("127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()


def test_lmgym_view_serves_on_loopback_and_prints_its_url(run_dir):
    with lmgym_view(run_dir) as base_url:
        response = httpx.get(base_url + "episodes?agent=random")
    assert response.status_code == 200 and "3 episodes" in response.text


# -- in a real browser ------------------------------------------------------------------------------
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
browser_test = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                  reason=f"{CHROMIUM} is absent: apt-get install -y chromium (see the Makefile)")


class ScriptWritingAgent(ExpertAgent):
    """The expert, after a first action that smuggles markup into the env's feedback
    (KeyDoor answers ``take X`` with "There is no X here.")."""

    name = "script-writer"

    def reset(self, *, seed=None, env_id=None):
        super().reset(seed=seed, env_id=env_id)
        self.first = True

    def decide(self, observation, info):
        if self.first:
            self.first = False
            return Decision("take <script>window.pwned=1</script>",
                            reasoning='<img src=x onerror="window.pwned=2">')
        return super().decide(observation, info)


@pytest.fixture
def chromium_page():
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            dialogs = []
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.dialogs = dialogs
            yield page
        finally:
            browser.close()


@pytest.mark.browser
@browser_test
def test_in_chromium_from_the_summary_of_a_smoke_run_to_an_episode_and_a_comparison(tmp_path, chromium_page):
    from lmgym.benchmarks.cli import run as bench_cli

    run = tmp_path / "smoke"
    assert bench_cli(["smoke", "--out", str(run), "--quiet"]) == 0
    page = chromium_page
    with lmgym_view(run) as base_url:
        page.goto(base_url)
        assert page.inner_text("h1") == "Benchmark smoke"
        # The summary's expert cell on KeyDoor-v0 lists that cell's episodes ...
        page.click('table.summary a[href="/episodes?env=lmgym%2FKeyDoor-v0&agent=expert"] >> nth=0')
        assert page.locator("table.episodes tbody tr").count() == 3
        # ... and one click opens an episode, step by step.
        page.click("table.episodes tbody tr >> nth=0 >> a")
        assert page.inner_text("h1") == "expert on lmgym/KeyDoor-v0, seed 0"
        transcript = open_source(run).transcript("lmgym/KeyDoor-v0|expert|0")
        assert page.locator("section.step").count() == len(transcript["steps"])
        assert page.locator("section.step >> nth=0 >> pre.completion mark.act").inner_text() == transcript["steps"][0]["action"]
        # The same env and seed played by random, side by side.
        page.click("text=expert vs random")
        assert page.inner_text("h1") == "expert vs random on lmgym/KeyDoor-v0, seed 0"
        assert page.locator(".side h2").all_inner_texts() == ["expert", "random"]
        random_steps = len(open_source(run).transcript("lmgym/KeyDoor-v0|random|0")["steps"])
        assert page.locator("section.step").count() == len(transcript["steps"]) + random_steps
        page.screenshot(path=str(tmp_path / "side_by_side.png"), full_page=True)
    assert (tmp_path / "side_by_side.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.browser
@browser_test
def test_in_chromium_a_script_in_an_observation_is_text(tmp_path, chromium_page):
    rollouts = tmp_path / "hostile.jsonl"
    assert lmgym_main(["rollout", "lmgym/KeyDoor-v0", "--agent", "test_viewer:ScriptWritingAgent", "--episodes", "1",
                       "--out", str(rollouts), "--quiet"]) == 0
    [episode] = open_source(rollouts).rows
    assert "<script>window.pwned=1</script>" in open_source(rollouts).transcript(episode["key"])["steps"][1]["observation"]
    page = chromium_page
    with lmgym_view(rollouts) as base_url:
        page.goto(base_url + "episodes")
        page.click("table.episodes tbody tr >> nth=0 >> a")
        observation = page.locator("section.step >> nth=1 >> pre.observation").inner_text()
        assert "There is no <script>window.pwned=1</script> here." in observation
        assert '<img src=x onerror="window.pwned=2">' in page.locator("section.step >> nth=0 >> pre.completion mark.reason").inner_text()
        assert page.evaluate("typeof window.pwned") == "undefined" and not page.dialogs
        shot = tmp_path / "episode.png"  # kept under the test's tmp folder as the artifact
        page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
