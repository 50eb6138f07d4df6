"""WebShop in a browser: a local web server over the text env's state machine.

``lmgym serve webshop`` (or ``python -m lmgym.envs.webshop.web``) starts a FastAPI app served by
uvicorn. Each visitor session owns one `WebShopEnv` (``observation_mode="html"``); the page is
that env's own ``html`` rendering, whose buttons post ``action=click[...]`` and whose search
form posts ``action=search`` with ``keywords``. The server turns a post into the same action
string an agent sends (``search[keywords]`` / ``click[value]``), steps the env and redirects
back to the page (post/redirect/get), so a person and an agent play exactly the same game and
earn the same reward. After Buy Now the page shows the score and the reward's breakdown.

Routes:

* ``GET /`` starts a session (``?seed=N`` or ``?task_index=I`` pick the goal; by default the
  n-th session of the server uses seed n) and redirects to ``/session/{id}``.
* ``GET /session/{id}`` shows the session's page; ``POST /session/{id}`` takes one action.
* Anything else, or an unknown session, is a 404 page; a malformed post is a 400 page.

Every product text, query and instruction reaches the page through the env's html escaping;
the server's own additions (feedback, breakdown) are escaped here.
"""

from __future__ import annotations

import argparse
import html
import re
import secrets
import threading
from collections import OrderedDict
from typing import Any
from urllib.parse import parse_qs

import gymnasium as gym
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

DEFAULT_ENV_ID = "lmgym/WebShop-v0"
#: Sessions kept per server; the least recently used is dropped beyond this.
DEFAULT_MAX_SESSIONS = 256
#: Actions a person may take per task before the session ends unbought (the registered
#: 15-step limit is an agent benchmark's budget, too tight for browsing by hand).
MAX_HUMAN_STEPS = 100
#: Longest form body accepted (a search box and a button; anything larger is not a person).
MAX_FORM_BYTES = 16_384
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

STYLE = """<style>
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 1rem auto; padding: 0 1rem; }
header { display: flex; gap: 1rem; align-items: baseline; border-bottom: 1px solid #ccc; margin-bottom: 1rem; }
form p { margin: 0.3rem 0; }
button { margin: 0.15rem; padding: 0.3rem 0.7rem; cursor: pointer; }
.product-link { display: block; margin-top: 0.8rem; font-weight: bold; }
.visited { color: #551a8b; }
.option.selected { background: #2b6cb0; color: white; }
.feedback { background: #fff3cd; padding: 0.5rem; }
table.breakdown td { padding: 0.1rem 0.8rem; }
</style>"""


class SessionStore:
    """Visitor sessions: id -> env, least recently used dropped beyond `max_sessions`."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], max_sessions: int):
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs)
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.started = 0
        self.lock = threading.Lock()

    def start(self, seed: int | None, task_index: int | None) -> str:
        env = gym.make(self.env_id, observation_mode="html", max_episode_steps=MAX_HUMAN_STEPS, **self.env_kwargs)
        options = {} if task_index is None else {"task_index": task_index}
        session_id = secrets.token_urlsafe(9)
        with self.lock:  # envs share the catalogue's search memo: one reset or step at a time
            seed = self.started if seed is None else seed
            self.started += 1
            _, info = env.reset(seed=seed, options=options)
            self.sessions[session_id] = {"env": env, "info": info, "feedback": "", "reward": None, "seed": seed}
            while len(self.sessions) > self.max_sessions:
                _, dropped = self.sessions.popitem(last=False)
                dropped["env"].close()
        return session_id

    def get(self, session_id: str) -> dict[str, Any] | None:
        with self.lock:
            state = self.sessions.get(session_id) if _SESSION_ID.match(session_id) else None
            if state is not None:
                self.sessions.move_to_end(session_id)
            return state


def form_action(body: bytes) -> str | None:
    """The env action a posted form asks for, or None when the form is not one of ours."""
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    action = fields.get("action", [""])[0]
    if action == "search":
        return f"search[{fields.get('keywords', [''])[0]}]"
    if action.startswith("click[") and action.endswith("]"):
        return action
    return None


def _breakdown_table(info: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(str(key))}</td><td>{html.escape(_fmt(value))}</td></tr>"
        for key, value in sorted(info.get("reward_info", {}).items())
    )
    purchased = info.get("purchased", {})
    bought = html.escape(f"{purchased.get('asin', '')} {purchased.get('options', {})} ${purchased.get('price', 0):.2f}")
    return f'<h3>Reward breakdown</h3><p id="purchased">Bought: {bought}</p><table class="breakdown">{rows}</table>'


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def render_page(state: dict[str, Any]) -> str:
    """The env's own html page with a header (new task link, feedback) and, after Buy Now,
    the score and the reward's breakdown."""
    env, info = state["env"], state["info"]
    page = env.unwrapped.session.render("html")
    header = ['<header><strong>lmgym WebShop</strong><a href="/" id="new-task">New task</a>',
              f'<span>seed {html.escape(str(state["seed"]))}</span></header>']
    if state["feedback"]:
        header.append(f'<p class="feedback" id="feedback">{html.escape(state["feedback"])}</p>')
    extra = ""
    if state["reward"] is not None:
        extra = (f'<p id="score" data-reward="{state["reward"]!r}">Score: {state["reward"]:.4f}'
                 f'{" (success)" if info.get("won") else ""}</p>')
        if "purchased" in info:
            extra += _breakdown_table(info)
    page = page.replace("</head>", f"{STYLE}</head>", 1)
    body_start = page.index(">", page.index("<body")) + 1
    return page[:body_start] + "\n" + "".join(header) + page[body_start:].replace(
        "</body>", f"{extra}</body>", 1)


def _error_page(status: int, message: str) -> HTMLResponse:
    body = (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{status}</title></head><body>"
            f"<h1>{status}</h1><p>{html.escape(message)}</p><p><a href=\"/\">Start a new task</a></p></body></html>")
    return HTMLResponse(body, status_code=status)


def create_app(env_id: str = DEFAULT_ENV_ID, env_kwargs: dict[str, Any] | None = None,
               max_sessions: int = DEFAULT_MAX_SESSIONS) -> FastAPI:
    """The web app serving `env_id` (any WebShop id; its catalogue loads on the first session)."""
    app = FastAPI(title="lmgym WebShop", docs_url=None, redoc_url=None, openapi_url=None)
    store = SessionStore(env_id, env_kwargs or {}, max_sessions)
    app.state.store = store

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, error: StarletteHTTPException) -> HTMLResponse:
        messages = {404: "There is no such page.", 405: "This page does not take that method."}
        return _error_page(error.status_code, messages.get(error.status_code, str(error.detail)))

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, _error: RequestValidationError) -> HTMLResponse:
        return _error_page(400, "seed and task_index must be whole numbers.")

    @app.get("/")
    def start(seed: int | None = None, task_index: int | None = None) -> RedirectResponse:
        session_id = store.start(seed, task_index)
        return RedirectResponse(f"/session/{session_id}", status_code=303)

    @app.get("/session/{session_id}", response_class=HTMLResponse)
    def show(session_id: str) -> HTMLResponse:
        state = store.get(session_id)
        if state is None:
            return _error_page(404, "This session does not exist (or has expired).")
        return HTMLResponse(render_page(state))

    @app.post("/session/{session_id}")
    async def act(session_id: str, request: Request):
        state = store.get(session_id)
        if state is None:
            return _error_page(404, "This session does not exist (or has expired).")
        body = await request.body()
        action = form_action(body) if len(body) <= MAX_FORM_BYTES else None
        if action is None:
            return _error_page(400, "The form did not name an action this shop knows.")
        with store.lock:  # one action at a time per server: the env is not thread-safe
            if state["reward"] is None:
                observation, reward, terminated, truncated, info = state["env"].step(action)
                state["info"] = info
                state["feedback"] = "" if info["action_valid"] else observation.split("\n", 1)[0]
                if terminated:
                    state["reward"] = float(reward)
                elif truncated:
                    state["reward"] = 0.0
                    state["feedback"] = f"{MAX_HUMAN_STEPS} actions without buying: this task is over."
            else:
                state["feedback"] = "The purchase is made; start a new task to shop again."
        return RedirectResponse(f"/session/{session_id}", status_code=303)

    return app


# -- command line ---------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``lmgym serve webshop``."""
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--env-id", default=DEFAULT_ENV_ID,
                        help="a WebShop id: lmgym/WebShop-v0 (real data) or lmgym/WebShop-Gen-v0 (generated)")
    parser.add_argument("--split", default=None, help="goal split: test, eval, train or all (default: the id's)")
    parser.add_argument("--num-products", type=int, default=None, help="catalogue size for lmgym/WebShop-Gen-v0")
    parser.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS,
                        help="visitor sessions kept in memory (least recently used dropped)")


def main(args: argparse.Namespace) -> int:
    """Serve until interrupted; returns the exit status."""
    import uvicorn

    from lmgym.envs.webshop.reward import noun_tagger

    noun_tagger()  # load spaCy now, not during a visitor's first purchase
    env_kwargs = {key: value for key, value in (("split", args.split), ("num_products", args.num_products))
                  if value is not None}
    app = create_app(args.env_id, env_kwargs, args.max_sessions)
    print(f"WebShop ({args.env_id}) on http://{args.host}:{args.port}/  (Ctrl+C stops)")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description="Serve WebShop as a web page")
    add_arguments(cli)
    raise SystemExit(main(cli.parse_args()))
