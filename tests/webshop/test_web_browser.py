"""End to end in headless Chromium: search, open a product, read a sub-page, choose options,
buy, read the score; the text env given the same actions earns the same reward.

Needs Debian's chromium (``apt-get install -y chromium``) and Playwright's Python package;
Playwright's own browser download is not used (it fails on closed networks).
"""

import json
import os
import socket
import threading
import time
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("spacy")
uvicorn = pytest.importorskip("uvicorn")
sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright

import lmgym  # noqa: E402,F401  registers the ids
from lmgym.envs.webshop.web import create_app  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason=f"{CHROMIUM} is absent: apt-get install -y chromium (see the Makefile)"),
]


def _env_id_and_kwargs():
    """The real shop when its data is there (CI), else the generated one."""
    data = os.environ.get("LMGYM_DATA")
    if data and (Path(data) / "webshop" / "items_shuffle_1000.json").exists():
        return "lmgym/WebShop-v0", {}
    return "lmgym/WebShop-Gen-v0", {"num_products": 300}


@pytest.fixture(scope="module")
def server():
    env_id, kwargs = _env_id_and_kwargs()
    app = create_app(env_id, kwargs)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        assert time.monotonic() < deadline, "the web server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", env_id, kwargs
    uv.should_exit = True
    thread.join(timeout=10)
    sock.close()


def _do_in_browser(page, action):
    """What a person does for `action`: type and submit a search, or press the button."""
    if action.startswith("search["):
        page.fill("#search_input", action[len("search["):-1])
        page.click('button[value="search"]')
    else:
        page.click(f"button[value={json.dumps(action, ensure_ascii=False)}]")
    page.wait_for_load_state()


def test_a_purchase_in_chromium_matches_the_text_env(server):
    base_url, env_id, kwargs = server
    seed = 3
    env = gym.make(env_id, **kwargs)
    _, info = env.reset(seed=seed)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            page.goto(f"{base_url}/?seed={seed}")
            assert info["task"] in page.inner_text("body")

            visited_sub_page, reward, terminated, pages_seen = False, 0.0, False, []
            while not terminated:
                actions = [info["expert_action"]]
                if info["page"] == "item_page" and not visited_sub_page:
                    actions = ["click[description]", "click[< prev]"]  # read the description first
                    visited_sub_page = True
                for action in actions:
                    _do_in_browser(page, action)
                    _, reward, terminated, _, info = env.step(action)
                    assert info["action_valid"], action
                    pages_seen.append(page.get_attribute("body", "data-page"))
                    assert pages_seen[-1] == info["page"]

            assert {"search_results", "item_page", "item_sub_page", "done"} <= set(pages_seen)
            score = float(page.get_attribute("#score", "data-reward"))
            assert score == reward
            assert "Your score" in page.inner_text("body")
            assert page.inner_text("#purchased").startswith("Bought: " + info["purchased"]["asin"])
            # A bad URL in the browser is a 404 page, not a traceback.
            response = page.goto(f"{base_url}/session/does-not-exist")
            assert response.status == 404 and "Traceback" not in page.content()
        finally:
            browser.close()
