"""`lmgym play`: play any registered environment in a terminal, as a person.

    lmgym play lmgym/ALFWorld-Gen-v0 --seed 3

Whatever is typed is sent to the env as an action, except the player's own commands, which
start with a colon so that no env action is hidden behind them (ALFWorld has a ``help``
action of its own):

    :help     these commands            :hint     the expert's next action, with its reason
    :actions  list the admissible actions again
    :task     the task again            :quit     leave (also :q, Ctrl-D or Ctrl-C)

A number picks that entry of the numbered action list (unless the number is itself an action).
With readline (Linux, macOS) the line is editable, the Up arrow recalls earlier lines (kept
across sessions in ``LMGYM_CACHE/play_history``) and Tab completes admissible actions.

After every step a status line gives the step count against the registered limit
(``step 3/50``), that step's reward and the return so far, and the step before the limit
says it is the last. The admissible actions are printed in numbered columns sized to the
terminal, in natural order ("cabinet 2" before "cabinet 10"), or in the page's order where
the env's info lists ``clickables`` (WebShop); they are printed again only when they change.
An env that takes a while (PromptEdit's generator writes and judges a batch each step) shows
the seconds elapsed while it works. Registered ids may name kwargs for people
(`lmgym.envs.registry.EnvEntry.play_kwargs`: WebShop plays its readable ``text_rich`` pages);
``--env-kwargs`` overrides them.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
import shutil
import sys
import textwrap
import threading
import time
from typing import Any, Callable, Sequence, TypeVar

from lmgym.data import cache_dir
from lmgym.io import atomic_write_text

PLAYER_COMMANDS = {
    ":help": "these commands",
    ":hint": "the expert's next action, with its reason (where the env has an expert)",
    ":actions": "list the admissible actions again",
    ":task": "the task again",
    ":quit": "leave (also :q, Ctrl-D or Ctrl-C)",
}
QUIT = (":quit", ":q", ":exit")
COMMAND_NAMES = frozenset(PLAYER_COMMANDS) | frozenset(QUIT)
#: Seconds a step may take before the elapsed-time line appears, and between its updates.
PROGRESS_DELAY_S, PROGRESS_EVERY_S = 0.4, 0.1
HISTORY_LENGTH = 1000

T = TypeVar("T")


# -- the pieces, pure functions ----------------------------------------------------------------
def natural_key(text: str) -> list[Any]:
    """Sort key that compares digit runs as numbers: "cabinet 2" < "cabinet 10"."""
    # re.split with a capturing group alternates text and digits, starting with text, so
    # positions hold the same type in every key and the lists always compare.
    return [int(part) if k % 2 else part.casefold() for k, part in enumerate(re.split(r"(\d+)", text))]


def display_order(info: dict[str, Any]) -> list[str]:
    """The admissible actions in the order a person reads them.

    Where info lists ``clickables`` (WebShop: the page's buttons, products in result order,
    options), the ``click[...]`` actions follow that order; everything else is natural order.
    """
    actions = sorted(info.get("admissible_actions", ()), key=natural_key)
    page = {f"click[{c}]": k for k, c in enumerate(info.get("clickables", ()))}
    return sorted(actions, key=lambda a: page.get(a, len(page)))  # stable: natural order within


def columns(entries: Sequence[str], width: int, gap: int = 3) -> list[str]:
    """Lay `entries` out in as many columns as fit in `width`, filled top to bottom (as ls does)."""
    if not entries:
        return []
    for ncols in range(len(entries), 0, -1):
        rows = math.ceil(len(entries) / ncols)
        cols = [entries[c * rows:(c + 1) * rows] for c in range(math.ceil(len(entries) / rows))]
        widths = [max(map(len, col)) for col in cols]
        if sum(widths) + gap * (len(cols) - 1) <= width or ncols == 1:
            break
    lines = []
    for r in range(rows):
        cells = [col[r].ljust(w) for col, w in zip(cols, widths) if r < len(col)]
        lines.append((" " * gap).join(cells).rstrip())
    return lines


def numbered(actions: Sequence[str]) -> list[str]:
    digits = len(str(len(actions)))
    return [f"[{k}]".rjust(digits + 2) + f" {action}" for k, action in enumerate(actions, start=1)]


def wrap(text: str, width: int) -> str:
    """`text` with its long lines wrapped at word boundaries to `width` (short lines untouched)."""
    return "\n".join(line if len(line) <= width else textwrap.fill(line, width, break_long_words=False,
                                                                      break_on_hyphens=False)
                     for line in text.split("\n"))


def status_line(steps: int, limit: int | None, reward: float, total: float) -> str:
    counter = f"step {steps}/{limit}" if limit else f"step {steps}"
    return f"-- {counter} | reward {reward:.4g} | return {total:.4g} --"


def wait_with_progress(work: Callable[[], T], label: str, stream=None, *, delay: float = PROGRESS_DELAY_S) -> T:
    """Run `work()`; on a terminal, show the seconds elapsed once it takes longer than `delay`.

    The work runs in a helper thread while this one redraws one line (carriage return), so a
    slow env looks busy, not hung; the line is erased when the work ends. Exceptions from the
    work are raised here. Off a terminal nothing is drawn.
    """
    stream = stream or sys.stdout
    if not stream.isatty():
        return work()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # handed to the waiting thread, raised there
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)  # daemon: Ctrl-C while waiting still exits
    start = time.monotonic()
    thread.start()
    thread.join(delay)
    drawn = 0
    with _keys_not_echoed():
        for spinner in itertools.cycle("|/-\\"):
            if not thread.is_alive():
                break
            text = f"{spinner} {label} {time.monotonic() - start:.1f} s"
            stream.write("\r" + text.ljust(drawn))
            stream.flush()
            drawn = len(text)
            thread.join(PROGRESS_EVERY_S)
        if drawn:
            stream.write("\r" + " " * drawn + "\r")
            stream.flush()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@contextlib.contextmanager
def _keys_not_echoed():
    """Keys typed while the env works stay queued for the next prompt but are not drawn over
    the progress line (POSIX terminals; elsewhere a no-op)."""
    try:
        import termios
    except ImportError:  # Windows
        yield
        return
    try:
        saved = termios.tcgetattr(sys.stdin.fileno())
    except (termios.error, OSError, ValueError, AttributeError):  # stdin is no terminal
        yield
        return
    quiet = list(saved)
    quiet[3] &= ~termios.ECHO  # lflags
    termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, quiet)  # TCSANOW keeps the queued input
    try:
        yield
    finally:
        termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, saved)


# -- readline: editing, history across sessions, Tab completion ----------------------------------
def _start_readline(candidates: Callable[[], list[str]]) -> Callable[[], None] | None:
    """Enable readline for input(); return a function that saves the history (None without readline)."""
    try:
        import readline
    except ImportError:  # Windows without pyreadline: plain input()
        return None
    history = cache_dir() / "play_history"
    try:
        readline.read_history_file(history)
    except OSError:
        pass
    readline.set_history_length(HISTORY_LENGTH)
    readline.set_completer_delims("")  # complete the whole line: actions contain spaces

    def complete(text: str, state: int) -> str | None:
        matches = [c for c in candidates() if c.startswith(text)]
        return matches[state] if state < len(matches) else None

    readline.set_completer(complete)
    # macOS's Python links libedit, whose binding syntax differs from GNU readline's.
    readline.parse_and_bind("bind ^I rl_complete" if "libedit" in (readline.__doc__ or "") else "tab: complete")

    def save() -> None:
        count = readline.get_current_history_length()
        lines = [readline.get_history_item(k) for k in range(max(1, count - HISTORY_LENGTH + 1), count + 1)]
        try:
            atomic_write_text(history, "".join(f"{line}\n" for line in lines if line))
        except OSError:  # a read-only cache is no reason to fail the game
            pass

    return save


# -- the game loop -----------------------------------------------------------------------------
def make_env(env_id: str, env_kwargs: dict[str, Any] | None = None):
    """`gymnasium.make` with the id's kwargs for people (`EnvEntry.play_kwargs`) under the user's."""
    import gymnasium as gym

    from lmgym.envs.registry import ENVS

    entry = ENVS.get(env_id)
    kwargs = {**(entry.play_kwargs if entry else {}), **(env_kwargs or {})}
    return gym.make(env_id, **kwargs)


def play(env_id: str, seed: int = 0, env_kwargs: dict[str, Any] | None = None,
         input_fn: Callable[[str], str] | None = None, make: Callable[..., Any] = make_env) -> int:
    """Play `env_id` from `seed` until the episode ends or the player leaves; returns 0.

    `input_fn` replaces `input` (tests script a session with it); readline is used only when
    playing on a terminal with the real `input`. `make(env_id, env_kwargs)` builds the env
    (the CLI passes one that turns a bad id or kwarg into its one-line error).
    """
    width = shutil.get_terminal_size((80, 24)).columns
    env, (observation, info) = wait_with_progress(
        lambda: _made_and_reset(make, env_id, seed, env_kwargs), f"starting {env_id}")
    limit = env.spec.max_episode_steps if env.spec else None
    interactive = input_fn is None and sys.stdin.isatty()
    save_history = _start_readline(lambda: list(PLAYER_COMMANDS) + info["admissible_actions"]) if interactive else None
    read = input_fn or input

    print(f"{env_id}, seed {seed}" + (f", at most {limit} steps" if limit else "") + "; :help lists the commands")
    if info["task"] not in observation:  # most envs show the task in the first observation
        print(wrap(f"Task: {info['task']}", width))
    print(f"\n{wrap(observation, width)}")
    steps, total, shown, warned_colon = 0, 0.0, None, False
    try:
        while True:
            actions = display_order(info)
            if actions != shown:
                print(_actions_text(actions, width))
                shown = actions
            if limit and steps == limit - 1:
                print("Last step: the episode ends after this action.")
            try:
                line = read("> ").strip()
            except (EOFError, KeyboardInterrupt):
                print()
                return _leave(steps, limit, total)
            if not line:
                continue
            if line.startswith(":") and line not in info["admissible_actions"]:
                if line.lower() in QUIT:
                    return _leave(steps, limit, total)
                print(_answer(line, info, actions, width))
                continue
            if line.isdigit() and line not in info["admissible_actions"]:
                if not 1 <= int(line) <= len(actions):
                    print(f"There is no action {line}; the list runs from 1 to {len(actions)}." if actions
                          else "This env lists no actions; type one in its grammar.")
                    continue
                line = actions[int(line) - 1]
                print(f"> {line}")
            observation, reward, terminated, truncated, info = wait_with_progress(
                lambda: env.step(line), "the env is working")
            steps += 1
            total += float(reward)
            print(f"\n{wrap(observation, width)}\n\n{status_line(steps, limit, float(reward), total)}")
            if not info["action_valid"] and not warned_colon and f":{line.lower()}" in COMMAND_NAMES:
                print(f"(The player's own commands start with a colon: :{line.lower()})")
                warned_colon = True
            if terminated or truncated:
                outcome = "won" if info["won"] else ("out of steps" if truncated else "episode over")
                print(f"[{outcome}] return {total:.4g} in {steps} steps")
                return 0
    finally:
        if save_history is not None:
            save_history()
        env.close()


def _made_and_reset(make: Callable[..., Any], env_id: str, seed: int, env_kwargs: dict[str, Any] | None):
    env = make(env_id, env_kwargs)
    return env, env.reset(seed=seed)


def _answer(command: str, info: dict[str, Any], actions: list[str], width: int) -> str:
    """What a player command other than :quit prints."""
    command = command.lower()
    if command == ":help":
        return _help()
    if command == ":hint":
        return wrap(_hint(info), width)
    if command == ":actions":
        return _actions_text(actions, width)
    if command == ":task":
        return wrap(f"Task: {info['task']}", width)
    return f"Unknown command {command}; :help lists the commands."


def _actions_text(actions: list[str], width: int) -> str:
    if not actions:
        return "\n(no list of actions here: type one in the env's grammar)"
    return f"\nActions ({len(actions)}; type one, or its number):\n" + "\n".join(columns(numbered(actions), width))


def _help() -> str:
    lines = ["Type an action in the env's grammar, or the number of a listed action. Your own commands:"]
    lines += [f"  {name:<9} {text}" for name, text in PLAYER_COMMANDS.items()]
    lines.append("Up/Down recall earlier lines, Tab completes an action.")
    return "\n".join(lines)


def _hint(info: dict[str, Any]) -> str:
    if "expert_action" not in info:
        return "This env has no expert to ask."
    reason = info.get("expert_reasoning")
    return f"Expert: {info['expert_action']}" + (f"  ({reason})" if reason else "")


def _leave(steps: int, limit: int | None, total: float) -> int:
    print(f"Left at step {steps}" + (f"/{limit}" if limit else "") + f", return {total:.4g}.")
    return 0
