"""WebShop in a browser: a local web server over the text env's state machine.

``lmgym serve webshop`` (or ``python -m lmgym.envs.webshop.web``) starts a FastAPI app served by
uvicorn. Each visitor session owns one `WebShopEnv` (``observation_mode="html"``); the page is
that env's own ``html`` rendering, whose buttons post ``action=click[...]`` and whose search
form posts ``action=search`` with ``keywords``. The server turns a post into the same action
string an agent sends (``search[keywords]`` / ``click[value]``), steps the env and redirects
back to the page (post/redirect/get), so a person and an agent play exactly the same game and
earn the same reward. After Buy Now the page shows the score and the reward's breakdown.

Every page has its own GET address, so results and products can be bookmarked, reloaded
and shared within a session (the original WebShop site is addressed the same way,
``web_agent_site/app.py``: ``/search_results/<session>/<keywords>/<page>``,
``/item_page/<session>/<asin>/...``). Opening an address the session is not on walks the env
there with the same actions a shopper would click (``click[back to search]``,
``search[...]``, ``click[next >]``, ``click[<asin>]``), so every change of state is still an
env step.

Routes:

* ``GET /`` starts a session (``?seed=N`` or ``?task_index=I`` pick the goal; by default the
  n-th session of the server uses seed n) and redirects to its page. A negative seed, a
  task_index outside the split or a non-number is a 400 page that says so.
* ``GET /session/{id}`` redirects to the address of the session's current page:
  ``/session/{id}/search`` (the search box), ``/session/{id}/search?q=KEYWORDS&page=N``
  (results, with the query shown), ``/session/{id}/item/{asin}?q=...&page=N`` (a product;
  ``/item/{asin}/{description|features|reviews|attributes}`` for its sub-pages) and
  ``/session/{id}/done`` (the score).
* ``POST /session/{id}`` takes one action and redirects to the new page's address.
* Anything else, or an unknown session, is a 404 page; a malformed post is a 400 page; an
  unexpected error is a 500 page (the traceback goes to the server's log, not the visitor).

Every product text, query and instruction reaches the page through the env's html escaping;
the server's own additions (query, feedback, breakdown) are escaped here.
"""

from __future__ import annotations

import argparse
import html
import re
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

import gymnasium as gym
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lmgym.envs.webshop.pages import DONE, ITEM, ITEM_SUB, RESULTS, SEARCH, SUB_PAGES

DEFAULT_ENV_ID = "lmgym/WebShop-v0"
#: Served in its place by ``--env-id``; needs no data.
GENERATED_ENV_ID = "lmgym/WebShop-Gen-v0"
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
.query { font-size: 1.1rem; }
table.breakdown td { padding: 0.1rem 0.8rem; }
</style>"""


class BadRequest(ValueError):
    """A request the shop cannot serve: answered with its status and message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class SessionStore:
    """Visitor sessions: id -> env, least recently used dropped beyond `max_sessions`.

    The first env is made here, so a missing catalogue fails when the server starts (with the
    data error), not on a visitor's first page.
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], max_sessions: int):
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs)
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.started = 0
        self.lock = threading.Lock()
        self._spare = self._make_env()
        self.num_tasks = self._spare.unwrapped.num_tasks

    def _make_env(self) -> gym.Env:
        return gym.make(self.env_id, observation_mode="html", max_episode_steps=MAX_HUMAN_STEPS, **self.env_kwargs)

    def start(self, seed: int | None, task_index: int | None) -> str:
        if seed is not None and seed < 0:
            raise BadRequest(400, f"seed must be 0 or more, got {seed}.")
        if task_index is not None and not 0 <= task_index < self.num_tasks:
            raise BadRequest(400, f"task_index must be between 0 and {self.num_tasks - 1} "
                                  f"(this split has {self.num_tasks} goals), got {task_index}.")
        options = {} if task_index is None else {"task_index": task_index}
        session_id = secrets.token_urlsafe(9)
        with self.lock:  # envs share the catalogue's search memo: one reset or step at a time
            env = self._spare if self._spare is not None else self._make_env()
            self._spare = None
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

    def act(self, state: dict[str, Any], action: str) -> bool:
        """Step the session's env with `action` (call under `lock`); False if it was invalid."""
        if state["reward"] is not None:
            state["feedback"] = "The purchase is made; start a new task to shop again."
            return False
        observation, reward, terminated, truncated, info = state["env"].step(action)
        state["info"] = info
        state["feedback"] = "" if info["action_valid"] else observation.split("\n", 1)[0]
        if terminated:
            state["reward"] = float(reward)
        elif truncated:
            state["reward"] = 0.0
            state["feedback"] = f"{MAX_HUMAN_STEPS} actions without buying: this task is over."
        return bool(info["action_valid"])


# -- addresses: a page of the session <-> its URL -----------------------------------------------
@dataclass(frozen=True)
class Place:
    """Where a session is: the page, and what identifies it (the search, the product)."""

    page: str
    query: str = ""
    page_num: int = 1
    asin: str = ""
    sub_page: str = ""

    def path(self, session_id: str) -> str:
        base = f"/session/{session_id}"
        if self.page == SEARCH:
            return f"{base}/search"
        if self.page == DONE:
            return f"{base}/done"
        query = "?" + urlencode({"q": self.query, "page": self.page_num})
        if self.page == RESULTS:
            return f"{base}/search{query}"
        sub = f"/{quote(self.sub_page.lower())}" if self.page == ITEM_SUB else ""
        return f"{base}/item/{quote(self.asin)}{sub}{query}"


def place_of(session: Any) -> Place:
    """The `Place` a `WebShopSession` is on."""
    if session.page in (SEARCH, DONE):
        return Place(session.page)
    if session.page == RESULTS:
        return Place(RESULTS, session.keywords, session.page_num)
    return Place(session.page, session.keywords, session.page_num, session.asin or "", session.sub_page or "")


def next_action(session: Any, target: Place) -> str | None:
    """The click or search that takes `session` one step towards `target` (None: it is there).

    Raises `BadRequest` (404) when the target cannot be reached from here: a result page the
    search does not have, a product not on that result page.
    """
    here = place_of(session)
    if _same(here, target):
        return None
    if target.page == SEARCH:
        return "click[back to search]"
    if here.page == SEARCH:
        return f"search[{target.query}]"
    if here.query != target.query:
        return "click[back to search]"
    same_product = here.asin.lower() == target.asin.lower() and here.page_num == target.page_num
    if here.page == ITEM_SUB:  # back to the item page (the options chosen there are kept)
        return "click[< prev]"
    if here.page == ITEM:
        if same_product and target.page == ITEM_SUB:
            if target.sub_page.lower() not in session.clickables():
                raise BadRequest(404, f"This shop's product pages have no {target.sub_page} page.")
            return f"click[{target.sub_page.lower()}]"
        return "click[< prev]"  # back to its result page
    if here.page_num > target.page_num:
        return "click[< prev]"
    if here.page_num < target.page_num:
        if "next >" not in session.clickables():
            raise BadRequest(404, f"The results for {target.query!r} end at page {here.page_num}.")
        return "click[next >]"
    if target.asin.lower() not in (a.lower() for a in session.page_products()):
        raise BadRequest(404, f"Product {target.asin} is not on page {target.page_num} of the results "
                              f"for {target.query!r}.")
    return f"click[{target.asin.lower()}]"


def _same(here: Place, target: Place) -> bool:
    return (here.page, here.query, here.page_num, here.asin.lower(), here.sub_page.lower()) == (
        target.page, target.query, target.page_num, target.asin.lower(), target.sub_page.lower())


def walk_to(store: SessionStore, state: dict[str, Any], target: Place) -> None:
    """Bring the session to `target` through env steps (under the store's lock)."""
    with store.lock:
        session = state["env"].unwrapped.session
        # Each step gets closer (search, then page moves, then product, then sub-page); the
        # bound only guards against a target that keeps moving away.
        for _ in range(MAX_HUMAN_STEPS):
            if state["reward"] is not None:
                return  # bought: the score page answers every address
            action = next_action(session, target)
            if action is None:
                return
            if not store.act(state, action):
                raise BadRequest(404, f"That page does not exist in this shop ({state['feedback']}).")
        raise BadRequest(404, "That page could not be reached.")


# -- pages -------------------------------------------------------------------------------------
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


def render_page(state: dict[str, Any], session_id: str = "") -> str:
    """The env's own html page with a header (new task link, the query on result pages,
    feedback) and, after Buy Now, the score and the reward's breakdown. Its form posts to
    ``/session/{session_id}`` (the page's own address when no id is given)."""
    env, info = state["env"], state["info"]
    session = env.unwrapped.session
    page = session.render("html")
    header = ['<header><strong>lmgym WebShop</strong><a href="/" id="new-task">New task</a>',
              f'<span>seed {html.escape(str(state["seed"]))}</span></header>']
    if session.page == RESULTS:
        header.append(f'<p class="query" id="query">Results for <q>{html.escape(session.keywords)}</q></p>')
    if state["feedback"]:
        header.append(f'<p class="feedback" id="feedback">{html.escape(state["feedback"])}</p>')
    extra = ""
    if state["reward"] is not None:
        extra = (f'<p id="score" data-reward="{state["reward"]!r}">Score: {state["reward"]:.4f}'
                 f'{" (success)" if info.get("won") else ""}</p>')
        if "purchased" in info:
            extra += _breakdown_table(info)
    page = page.replace("</head>", f"{STYLE}</head>", 1)
    if session_id:
        page = page.replace('<form method="post">', f'<form method="post" action="/session/{session_id}">', 1)
    body_start = page.index(">", page.index("<body")) + 1
    return page[:body_start] + "\n" + "".join(header) + page[body_start:].replace(
        "</body>", f"{extra}</body>", 1)


def _error_page(status: int, message: str) -> HTMLResponse:
    body = (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{status}</title></head><body>"
            f"<h1>{status}</h1><p>{html.escape(message)}</p><p><a href=\"/\">Start a new task</a></p></body></html>")
    return HTMLResponse(body, status_code=status)


_NO_SESSION = "This session does not exist (or has expired)."


def create_app(env_id: str = DEFAULT_ENV_ID, env_kwargs: dict[str, Any] | None = None,
               max_sessions: int = DEFAULT_MAX_SESSIONS) -> FastAPI:
    """The web app serving `env_id` (any WebShop id). Its catalogue loads here: without the
    data this raises `lmgym.data.DataNotFoundError`."""
    store = SessionStore(env_id, env_kwargs or {}, max_sessions)
    app = FastAPI(title="lmgym WebShop", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.store = store

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, error: StarletteHTTPException) -> HTMLResponse:
        messages = {404: "There is no such page.", 405: "This page does not take that method."}
        return _error_page(error.status_code, messages.get(error.status_code, str(error.detail)))

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, _error: RequestValidationError) -> HTMLResponse:
        return _error_page(400, "seed, task_index and page must be whole numbers.")

    @app.exception_handler(BadRequest)
    async def refused(_request: Request, error: BadRequest) -> HTMLResponse:
        return _error_page(error.status, str(error))

    @app.exception_handler(Exception)  # Starlette still re-raises it, so the server logs the traceback
    async def crashed(_request: Request, _error: Exception) -> HTMLResponse:
        return _error_page(500, "The shop hit an error on this page; the server's log has the details.")

    def session_or_404(session_id: str) -> dict[str, Any]:
        state = store.get(session_id)
        if state is None:
            raise BadRequest(404, _NO_SESSION)
        return state

    def show(session_id: str, target: Place) -> HTMLResponse:
        state = session_or_404(session_id)
        walk_to(store, state, target)
        return HTMLResponse(render_page(state, session_id))

    @app.get("/")
    def start(seed: int | None = None, task_index: int | None = None) -> RedirectResponse:
        session_id = store.start(seed, task_index)
        return RedirectResponse(f"/session/{session_id}/search", status_code=303)

    @app.get("/session/{session_id}")
    def current(session_id: str) -> RedirectResponse:
        state = session_or_404(session_id)
        return RedirectResponse(place_of(state["env"].unwrapped.session).path(session_id), status_code=303)

    @app.get("/session/{session_id}/search", response_class=HTMLResponse)
    def search(session_id: str, q: str | None = None, page: int = 1) -> HTMLResponse:
        keywords = " ".join((q or "").lower().split())  # as the search box normalises them
        if page < 1:
            raise BadRequest(400, f"page must be 1 or more, got {page}.")
        return show(session_id, Place(RESULTS, keywords, page) if keywords else Place(SEARCH))

    @app.get("/session/{session_id}/item/{asin}", response_class=HTMLResponse)
    def item(session_id: str, asin: str, q: str = "", page: int = 1) -> HTMLResponse:
        return show(session_id, _item_place(asin, q, page))

    @app.get("/session/{session_id}/item/{asin}/{sub_page}", response_class=HTMLResponse)
    def item_sub_page(session_id: str, asin: str, sub_page: str, q: str = "", page: int = 1) -> HTMLResponse:
        names = {name.lower(): name for name in SUB_PAGES}
        if sub_page.lower() not in names:
            raise BadRequest(404, "There is no such page.")
        return show(session_id, _item_place(asin, q, page, names[sub_page.lower()]))

    @app.get("/session/{session_id}/done", response_class=HTMLResponse)
    def done(session_id: str) -> HTMLResponse:
        state = session_or_404(session_id)
        if state["reward"] is None:
            return RedirectResponse(f"/session/{session_id}", status_code=303)
        return HTMLResponse(render_page(state, session_id))

    @app.post("/session/{session_id}")
    async def act(session_id: str, request: Request):
        state = session_or_404(session_id)
        body = await request.body()
        action = form_action(body) if len(body) <= MAX_FORM_BYTES else None
        if action is None:
            return _error_page(400, "The form did not name an action this shop knows.")
        with store.lock:  # one action at a time per server: the env is not thread-safe
            store.act(state, action)
            path = place_of(state["env"].unwrapped.session).path(session_id)
        return RedirectResponse(path, status_code=303)

    return app


def _item_place(asin: str, query: str, page: int, sub_page: str = "") -> Place:
    keywords = " ".join(query.lower().split())
    if not keywords or page < 1:
        raise BadRequest(404, "A product's address names the search it was found by (?q=...&page=N).")
    return Place(ITEM_SUB if sub_page else ITEM, keywords, page, asin, sub_page)


# -- command line ---------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``lmgym serve webshop``."""
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--env-id", default=DEFAULT_ENV_ID,
                        help=f"a WebShop id: {DEFAULT_ENV_ID} (real data) or {GENERATED_ENV_ID} (generated, no data)")
    parser.add_argument("--split", default=None, help="goal split: test, eval, train or all (default: the id's)")
    parser.add_argument("--num-products", type=int, default=None, help=f"catalogue size for {GENERATED_ENV_ID}")
    parser.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS,
                        help="visitor sessions kept in memory (least recently used dropped)")


def main(args: argparse.Namespace) -> int:
    """Serve until interrupted; returns the exit status.

    Without the real catalogue this stops at once with the data error and names the generated
    shop: serving another shop than the one asked for would make its scores incomparable to
    WebShop's, so that stays the user's explicit choice (``--env-id lmgym/WebShop-Gen-v0``).
    """
    import uvicorn

    from lmgym.data import DataNotFoundError
    from lmgym.envs.webshop.reward import noun_tagger

    env_kwargs = {key: value for key, value in (("split", args.split), ("num_products", args.num_products))
                  if value is not None}
    try:
        app = create_app(args.env_id, env_kwargs, args.max_sessions)
    except DataNotFoundError as error:  # one line: what is missing, and the shop that needs no data
        raise DataNotFoundError(f"{error.summary} (--env-id {GENERATED_ENV_ID} serves a generated shop that needs "
                                f"no data; the README's Data section shows the layout.)", error.family, error.files) from None
    noun_tagger()  # load spaCy now, not during a visitor's first purchase
    print(f"WebShop ({args.env_id}) on http://{args.host}:{args.port}/  (Ctrl+C stops)")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description="Serve WebShop as a web page")
    add_arguments(cli)
    raise SystemExit(main(cli.parse_args()))
