"""`lmgym play`: its pieces, scripted games, and real sessions in a terminal (tmux, pty).

The terminal tests run ``python -m lmgym play`` inside tmux (a real pseudo-terminal, so
readline is live) and type into it with ``send-keys``, reading the screen with
``capture-pane``. ``make test`` installs tmux the way it installs Chromium; without it those
tests skip and say so.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import pytest

import lmgym  # noqa: F401  registers the ids
from lmgym.play import (PROGRESS_DELAY_S, columns, display_order, natural_key, numbered, play, status_line,
                        wait_with_progress)

REPO = Path(__file__).resolve().parents[2]


# -- pure pieces -------------------------------------------------------------------------------
def test_natural_order_puts_cabinet_2_before_cabinet_10():
    names = ["go to cabinet 10", "go to cabinet 2", "Go to cabinet 1", "examine cabinet 2", "go to cabinet 2b"]
    assert sorted(names, key=natural_key) == [
        "examine cabinet 2", "Go to cabinet 1", "go to cabinet 2", "go to cabinet 2b", "go to cabinet 10"]


def test_webshop_actions_keep_the_pages_order():
    info = {"admissible_actions": sorted(["click[b2]", "click[back to search]", "click[b1]", "click[next >]"]),
            "clickables": ["back to search", "next >", "b2", "b1"]}
    assert display_order(info) == ["click[back to search]", "click[next >]", "click[b2]", "click[b1]"]
    # Without clickables: natural order.
    assert display_order({"admissible_actions": ["take 10", "take 9"]}) == ["take 9", "take 10"]


@pytest.mark.parametrize("width", [20, 60, 100, 200])
def test_columns_fit_the_width_and_keep_every_entry_in_order(width):
    entries = numbered([f"go to drawer {k}" for k in range(1, 66)])
    lines = columns(entries, width)
    assert all(len(line) <= width for line in lines) or len(lines) == len(entries)
    cells = [cell for line in lines for cell in line.split("   ") if cell.strip()]
    assert sorted(c.strip() for c in cells) == sorted(e.strip() for e in entries)
    # Filled top to bottom: the first column reads 1, 2, 3, ...
    assert [line.split("]")[0].strip() for line in lines[:3]] == ["[1", "[2", "[3"]
    if width >= 100:
        assert len(lines) <= 22, "65 actions should take a third of the lines or fewer at 100 columns"


def test_status_line():
    assert status_line(3, 50, 0.0, 0.0) == "-- step 3/50 | reward 0 | return 0 --"
    assert status_line(2, None, 0.125, 0.5) == "-- step 2 | reward 0.125 | return 0.5 --"


# -- scripted games (input_fn stands in for the keyboard) -----------------------------------------
def _script(*lines):
    feed = iter(lines)

    def read(_prompt):
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None
    return read


def test_a_game_is_won_by_numbers_and_hints(capsys):
    env = gym.make("lmgym/KeyDoor-v0")
    _, info = env.reset(seed=3)
    numbers = []
    while True:
        numbers.append(str(display_order(info).index(info["expert_action"]) + 1))
        *_, terminated, truncated, info = env.step(info["expert_action"])
        if terminated or truncated:
            break
    assert play("lmgym/KeyDoor-v0", seed=3, input_fn=_script(":hint", *numbers)) == 0
    out = capsys.readouterr().out
    assert "Expert: " in out and f"[won] return 1 in {len(numbers)} steps" in out
    assert f"-- step {len(numbers)}/30 | reward 1 | return 1 --" in out
    task = info["task"]
    assert out.count(task) == 1, "the task is printed once (KeyDoor's first observation shows it)"


def test_player_commands_do_not_reprint_the_list_and_do_not_step(capsys):
    play("lmgym/KeyDoor-v0", seed=0, input_fn=_script(":help", ":hint", ":task", ":nope", "99", ":quit"))
    out = capsys.readouterr().out
    assert out.count("Actions (") == 1
    assert "-- step" not in out, "no player command is an env step"
    assert "Unknown command :nope" in out and "There is no action 99" in out
    assert "Left at step 0/30" in out


def test_an_env_action_named_help_reaches_the_env(capsys):
    # ALFWorld's own `help` action lists its commands; the player's help is `:help`.
    play("lmgym/ALFWorld-Gen-v0", seed=0, input_fn=_script("help"))
    out = capsys.readouterr().out
    assert "Available commands:" in out and "-- step 1/50 |" in out


def test_a_bare_player_command_is_sent_to_the_env_with_a_reminder(capsys):
    play("lmgym/KeyDoor-v0", seed=0, input_fn=_script("quit", "quit"))
    out = capsys.readouterr().out
    assert "I don't understand that." in out and out.count("start with a colon: :quit") == 1


def test_the_last_step_is_announced_and_the_limit_ends_the_game(capsys):
    play("lmgym/KeyDoor-v0", seed=0, input_fn=_script(*["look"] * 30))
    out = capsys.readouterr().out
    assert out.count("Last step") == 1
    assert out.index("-- step 29/30") < out.index("Last step") < out.index("-- step 30/30")
    assert "[out of steps] return 0 in 30 steps" in out
    assert out.count("Actions (") == 1, "an unchanged list is not printed again"


def test_webshop_plays_its_readable_pages_by_default(capsys):
    pytest.importorskip("bm25s")
    play("lmgym/WebShop-Gen-v0", seed=0, env_kwargs={"num_products": 300}, input_fn=_script("1"))
    out = capsys.readouterr().out
    assert "[button] Search [button_]" in out and " [SEP] " not in out
    env = gym.make("lmgym/WebShop-Gen-v0", num_products=300)
    _, info = env.reset(seed=0)
    _, _, _, _, info = env.step(info["admissible_actions"][0])
    listed = out[out.rindex("Actions ("):]
    products = [c for c in info["clickables"] if c not in ("back to search", "next >")]
    number = {action: int(k) for k, action in re.findall(r"\[(\d+)\] (click\[[^\]]+\])", listed)}
    positions = [number[f"click[{asin}]"] for asin in products]
    assert positions == sorted(positions), "products are numbered in result order"
    # The agents' default stays the [SEP] view.
    play("lmgym/WebShop-Gen-v0", seed=0, env_kwargs={"num_products": 300, "observation_mode": "text"},
         input_fn=_script())
    assert " [SEP] " in capsys.readouterr().out


# -- a real terminal ---------------------------------------------------------------------------
class Terminal:
    """A tmux session on a private socket, running one command; type with `keys`, read `screen`,
    or `output`: every byte the command wrote, lines later redrawn or erased included."""

    def __init__(self, command: list[str], env: dict[str, str], width: int = 100, height: int = 40):
        self.socket = f"lmgym-test-{os.getpid()}-{time.monotonic_ns()}"
        assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        line = f"env {assignments} {shlex.join(command)}; echo \"[exit $?]\"; sleep 600"
        self._tmux("new-session", "-d", "-s", "play", "-x", str(width), "-y", str(height), line)
        descriptor, log = tempfile.mkstemp(prefix="lmgym-terminal-")
        os.close(descriptor)  # tmux's `cat` appends to it by name
        self.log = Path(log)
        self._tmux("pipe-pane", "-t", "play", f"cat >> {shlex.quote(str(self.log))}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def _tmux(self, *args: str) -> str:
        result = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "play", *keys)

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-t", "play", "-l", text)  # literally, no key names

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-t", "play", "-S", "-5000")

    def wait_for(self, text: str, count: int = 1, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if screen.count(text) >= count:
                return screen
            assert time.monotonic() < deadline, f"{text!r} (x{count}) never appeared:\n{screen}"
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)
        self.log.unlink(missing_ok=True)


needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is absent: apt-get install -y tmux (make test installs it)")


@pytest.fixture
def terminal(tmp_path):
    opened = []

    def open_play(*args: str) -> Terminal:
        env = {"PYTHONPATH": str(REPO), "LMGYM_CACHE": str(tmp_path / "cache"), "TERM": "xterm-256color",
               "PYTHONUNBUFFERED": "1"}
        env.update({k: os.environ[k] for k in ("LMGYM_DATA", "HOME", "PATH") if k in os.environ})
        opened.append(Terminal([sys.executable, "-m", "lmgym", "play", *args], env))
        return opened[-1]

    yield open_play
    for term in opened:
        term.close()


@needs_tmux
def test_up_arrow_recalls_history_and_the_line_is_editable(terminal):
    term = terminal("lmgym/KeyDoor-v0", "--seed", "0")
    term.wait_for("Actions (")
    term.type("go east")
    term.keys("Enter")
    term.wait_for("-- step 1/30")
    term.keys("Up")  # readline recalls "go east"; without readline this prints ^[[A
    term.keys("Enter")
    screen = term.wait_for("-- step 2/30")
    assert "^[[A" not in screen and screen.count("> go east") == 2
    # Edit inside the line: type "lok", move left once, insert the missing "o".
    term.type("lok")
    term.keys("Left")
    term.type("o")
    term.keys("Enter")
    screen = term.wait_for("-- step 3/30")
    assert "> look" in screen and "I don't understand" not in screen
    # Tab completes an admissible action.
    term.type("inv")
    term.keys("Tab")
    term.keys("Enter")
    screen = term.wait_for("-- step 4/30")
    assert "> inventory" in screen
    term.keys("C-d")
    assert "[exit 0]" in term.wait_for("[exit 0]")


@needs_tmux
def test_history_is_kept_across_sessions(terminal):
    first = terminal("lmgym/KeyDoor-v0")
    first.wait_for("Actions (")
    first.type(":task")
    first.keys("Enter")
    first.keys("C-d")
    first.wait_for("[exit 0]")
    second = terminal("lmgym/KeyDoor-v0")
    second.wait_for("Actions (")
    second.keys("Up")
    second.keys("Enter")
    screen = second.wait_for("Task: ", count=1)
    assert "> :task" in screen


@needs_tmux
def test_promptedit_shows_progress_while_it_generates(terminal):
    pytest.importorskip("torch")
    from lmgym.data import DataNotFoundError
    from lmgym.envs.promptedit.tasks import load_task

    try:
        load_task("SuperNI")
    except DataNotFoundError as error:
        pytest.skip(f"no SuperNI data: {str(error).splitlines()[0]}")
    # One torch thread: on a shared CPU, oversubscribed threads make each batch many times slower.
    # A batch of 32 takes seconds even on a fast machine (a batch of 4 took 0.4 s in CI, too quick to see).
    term = terminal("lmgym/PromptEdit-SuperNI-v0", "--env-kwargs", '{"batch_size": 32, "generator_kwargs": {"threads": 1}}')
    term.wait_for("Actions (", timeout=180)
    term.type("1")
    term.keys("Enter")
    # The step generates and judges a batch (seconds); the screen shows time passing meanwhile.
    # Read from the terminal's whole output, not by sampling the screen: a sample can miss a
    # line that is redrawn and erased while a loaded machine is slow to capture the pane.
    screen = term.wait_for("-- step 1/8", timeout=180)
    before_step = term.output().split("-- step 1/8")[0]
    elapsed = set(re.findall(r"the env is working (\d+\.\d) s", before_step))
    assert len(elapsed) >= 2, f"no progress line counted the seconds while the env worked: {elapsed}"
    assert "the env is working" not in screen.splitlines()[-3], "the progress line is erased afterwards"


def test_progress_line_on_a_pseudo_terminal():
    """Through Python's pty: a slow call draws elapsed seconds, a fast one draws nothing."""
    import pty

    script = ("import time; from lmgym.play import wait_with_progress as w;"
              "w(lambda: None, 'fast'); print('fast done');"
              f"w(lambda: time.sleep({PROGRESS_DELAY_S} + 0.6), 'slow'); print('slow done')")
    pid, fd = pty.fork()
    if pid == 0:  # the child runs on the pty's slave side
        os.environ["PYTHONPATH"] = str(REPO)
        os.execv(sys.executable, [sys.executable, "-c", script])
    output = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the pty
            break
        if not chunk:
            break
        output += chunk
    os.waitpid(pid, 0)
    text = output.decode()
    assert "fast done" in text and "slow done" in text
    assert "fast " not in text.split("fast done")[0]
    assert re.search(r"[|/\\-] slow \d+\.\d s", text), text


def test_progress_is_silent_off_a_terminal_and_raises_the_works_error(capsys):
    assert wait_with_progress(lambda: 7, "x") == 7
    with pytest.raises(ZeroDivisionError):
        wait_with_progress(lambda: 1 / 0, "x")
    assert capsys.readouterr().out == ""
