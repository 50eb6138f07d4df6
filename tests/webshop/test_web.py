"""The WebShop web server without a browser (FastAPI's TestClient): play, escaping, 404s."""

import re

import gymnasium as gym
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("spacy")

import lmgym  # noqa: E402,F401  registers the ids
from fastapi.testclient import TestClient  # noqa: E402

from lmgym.envs.webshop.web import create_app, form_action  # noqa: E402

ENV_ID = "lmgym/WebShop-Gen-v0"
ENV_KWARGS = {"num_products": 300}


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app(ENV_ID, ENV_KWARGS, max_sessions=8))


def _start(client, seed):
    response = client.get(f"/?seed={seed}")
    assert response.status_code == 200
    session_path = response.url.path
    assert re.fullmatch(r"/session/[A-Za-z0-9_-]+", session_path)
    return session_path, response


def _post(client, path, action):
    """Post what the page's form would post for `action` (search box or a button)."""
    if action.startswith("search["):
        data = {"action": "search", "keywords": action[len("search["):-1]}
    else:
        data = {"action": action}
    return client.post(path, data=data)


def test_an_expert_episode_over_http_earns_the_text_envs_reward(client):
    env = gym.make(ENV_ID, **ENV_KWARGS)
    _, info = env.reset(seed=5)
    path, page = _start(client, seed=5)
    assert info["task"] in page.text
    reward, terminated = 0.0, False
    while not terminated:
        action = info["expert_action"]
        _, reward, terminated, _, info = env.step(action)
        page = _post(client, path, action)
        assert page.status_code == 200 and 'id="feedback"' not in page.text
    score = re.search(r'id="score" data-reward="([0-9.]+)"', page.text)
    assert score is not None and float(score.group(1)) == reward == 1.0
    assert "Thank you for shopping with us!" in page.text and "Reward breakdown" in page.text
    # After Buy Now nothing changes the result.
    again = _post(client, path, "click[back to search]")
    assert "The purchase is made" in again.text and f'data-reward="{reward!r}"' in again.text


def test_invalid_actions_are_reported_and_escaped(client):
    path, _ = _start(client, seed=1)
    page = client.post(path, data={"action": "click[<img src=x onerror=alert(1)>]"})
    assert page.status_code == 200
    assert 'id="feedback"' in page.text
    assert "<img src=x" not in page.text and "&lt;img src=x onerror=alert(1)&gt;" in page.text


def test_page_text_is_escaped(client):
    path, _ = _start(client, seed=2)
    store = client.app.state.store
    state = store.get(path.rsplit("/", 1)[1])
    session = state["env"].unwrapped.session
    session.goal = {**session.goal, "instruction_text": 'buy <script>alert("x")</script> & "quotes"'}
    page = client.get(path)
    assert "<script>alert" not in page.text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &quot;quotes&quot;" in page.text
    # A search query full of markup is an ordinary query.
    results = _post(client, path, "search[<b>bold</b> nail polish]")
    assert results.status_code == 200 and "<b>bold</b>" not in results.text


@pytest.mark.parametrize("method, url", [
    ("get", "/nope"), ("get", "/session/unknown"), ("post", "/session/unknown"),
    ("get", "/session/..%2F..%2Fetc%2Fpasswd"), ("get", "/session/a/b"), ("get", "/docs"),
])
def test_bad_urls_are_404_pages(client, method, url):
    response = getattr(client, method)(url)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html") and "Traceback" not in response.text


def test_malformed_requests_are_400_pages(client):
    path, _ = _start(client, seed=0)
    assert client.post(path, data={"action": "delete everything"}).status_code == 400
    assert client.post(path, content=b"\xff\xfe junk", headers={"content-type": "text/plain"}).status_code == 400
    assert client.post(path, data={"action": "search", "keywords": "x" * 20_000}).status_code == 400
    assert client.get("/?seed=abc").status_code == 400


def test_sessions_beyond_the_limit_drop_the_oldest(client):
    first, _ = _start(client, seed=0)
    for seed in range(8):
        _start(client, seed=seed)
    assert client.get(first).status_code == 404


def test_form_action_mapping():
    assert form_action(b"action=search&keywords=red+shoes") == "search[red shoes]"
    assert form_action(b"action=click%5Bbuy+now%5D") == "click[buy now]"
    assert form_action(b"action=rm") is None
    assert form_action(b"") is None
