"""``lmgym view PATH``: a benchmark run folder or a rollout file as web pages (extra ``lmgym[web]``).

A FastAPI app served by uvicorn on loopback (``--host``/``--port``), as ``lmgym serve webshop``.
Every request first reads what the files gained since the last one, so a run still being
written can be watched by reloading. Routes (query parameters, all optional):

* ``GET /``: the summary (success with Wilson intervals, return, score, steps, tokens, seconds;
  every cell links to its episodes), the paired comparisons and the run's plots.
* ``GET /episodes?env=&agent=&outcome=won|lost|error&seed=&sort=episode|return|steps|seconds&order=``
* ``GET /episode?key=K``: one episode step by step (``key`` is the row's ``env|agent|episode``).
* ``GET /compare?env=&a=&b=``: two agents' outcomes seed by seed; with ``&seed=S`` the two
  episodes side by side.
* ``GET /files/success.png``, ``/files/returns.png``: the run's plots (no other file is served).

An unknown key, env, agent, seed or path is a 404 page; nothing answers with a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import socket
from typing import Any

from lmgym.benchmarks.viewer import pages
from lmgym.benchmarks.viewer.store import PLOTS, SORTS, Source, ViewerError, open_source

DEFAULT_PORT = 8080


def create_app(source: Source) -> Any:
    """The FastAPI app serving `source` (see the module docstring for its routes)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import FileResponse, HTMLResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    app = FastAPI(title="lmgym view", docs_url=None, redoc_url=None, openapi_url=None)

    def not_found(message: str) -> HTMLResponse:
        return HTMLResponse(pages.error_page(404, message), status_code=404)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, error: StarletteHTTPException) -> HTMLResponse:
        message = "There is no such page." if error.status_code == 404 else str(error.detail)
        return HTMLResponse(pages.error_page(error.status_code, message), status_code=error.status_code)

    @app.exception_handler(Exception)
    async def server_error(_request: Request, error: Exception) -> HTMLResponse:
        # One line for the reader of the page; the traceback is never sent.
        message = f"The viewer could not render this page ({type(error).__name__}: {str(error)[:200]})."
        return HTMLResponse(pages.error_page(500, message), status_code=500)

    @app.middleware("http")
    async def refresh(request: Request, call_next):
        source.refresh()
        return await call_next(request)

    @app.get("/", response_class=HTMLResponse)
    def run() -> str:
        return pages.run_page(source)

    @app.get("/episodes", response_class=HTMLResponse)
    def episodes(env: str = "", agent: str = "", outcome: str = "", seed: str = "", sort: str = "episode",
                 order: str = "ascending") -> str:
        return pages.episodes_page(source, env=env or None, agent=agent or None, outcome=outcome or None,
                                   seed=seed.strip() or None, sort=sort if sort in SORTS else "episode",
                                   descending=order == "descending")

    @app.get("/episode", response_class=HTMLResponse)
    def episode(key: str = ""):
        row = source.by_key.get(key)
        if row is None:
            return not_found(f"No episode has the key {key!r}.")
        return pages.episode_page(source, row)

    @app.get("/compare", response_class=HTMLResponse)
    def compare(env: str = "", a: str = "", b: str = "", seed: str = ""):
        envs = source.envs()
        env = env or next((e for e in envs if len(source.agents(e)) >= 2), "")
        if not env:
            return not_found("No env has episodes of two agents to compare.")
        agents = source.agents(env)
        if env not in envs or len(agents) < 2:
            return not_found(f"No two agents played the env {env!r}.")
        a = a or agents[0]
        b = b or next(x for x in agents if x != a)
        for name in (a, b):
            if name not in agents:
                return not_found(f"The agent {name!r} has no episode on {env!r}.")
        if not seed:
            return pages.pairs_page(source, env, a, b)
        paired = source.paired(env, seed)
        if a not in paired or b not in paired:
            return not_found(f"{a!r} and {b!r} did not both play {env!r} with seed {seed!r}.")
        return pages.side_by_side_page(source, env, paired[a], paired[b])

    @app.get("/files/{name}")
    def files(name: str):
        if name not in source.plots():  # a fixed list of names: no path reaches outside the run
            return not_found(f"This run has no file {name!r} to show (only {', '.join(PLOTS)}).")
        return FileResponse(source.path / name, media_type="image/png")

    return app


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0 picks a free one); a clear error when taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except (OSError, OverflowError) as error:
        reason = getattr(error, "strerror", None) or error
        raise ViewerError(f"cannot listen on {host}:{port} ({reason}); try another --host or --port") from None


def address(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


# -- command line ---------------------------------------------------------------------------
def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535)")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``lmgym view``."""
    parser.add_argument("path", help="a benchmark output folder (lmgym bench --out) or a rollout file (.jsonl)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: loopback only)")
    parser.add_argument("--port", type=_port, default=DEFAULT_PORT,
                        help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")


def main(args: argparse.Namespace) -> int:
    """Serve until interrupted; returns the exit status."""
    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        raise ViewerError("lmgym view needs fastapi and uvicorn: pip install 'lmgym[web]'")
    import uvicorn

    source = open_source(args.path)
    sock = listen(args.host, args.port)
    port = sock.getsockname()[1]
    print(f"lmgym view: {source.title} ({len(source.rows)} episodes) on {address(args.host, port)}  "
          "(Ctrl+C stops)", flush=True)
    server = uvicorn.Server(uvicorn.Config(create_app(source), log_level="warning"))
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    cli = argparse.ArgumentParser(prog="lmgym view", description=__doc__.split("\n\n")[0])
    add_arguments(cli)
    raise SystemExit(main(cli.parse_args()))
