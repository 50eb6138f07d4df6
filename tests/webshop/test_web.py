"""The WebShop web server without a browser (FastAPI's TestClient): play, addresses, escaping,
bad requests."""

import os
import re
import subprocess
import sys
from urllib.parse import parse_qs, urlsplit

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
    """Start a session; returns its path (``/session/ID``, where forms post) and the first page."""
    response = client.get(f"/?seed={seed}")
    assert response.status_code == 200
    match = re.fullmatch(r"(/session/[A-Za-z0-9_-]+)/search", response.url.path)
    assert match, response.url
    return match.group(1), response


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
        assert f'data-page="{info["page"]}"' in page.text
        session = env.unwrapped.session
        expected = {"search_results": f"{path}/search", "item_page": f"{path}/item/{session.asin}",
                    "item_sub_page": f"{path}/item/{session.asin}/", "done": f"{path}/done"}[info["page"]]
        assert page.url.path.startswith(expected), (page.url, info["page"])
        if info["page"] != "done":
            assert parse_qs(page.url.query.decode()) == {"q": [session.keywords], "page": [str(session.page_num)]}
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


@pytest.mark.parametrize("query, message", [
    ("seed=-1", "seed must be 0 or more, got -1."),
    ("task_index=999999", "task_index must be between 0 and "),
    ("task_index=-1", "task_index must be between 0 and "),
    ("seed=abc", "must be whole numbers"),
])
def test_a_bad_seed_or_task_index_is_a_400_that_says_why(client, query, message):
    response = client.get(f"/?{query}")
    assert response.status_code == 400 and message in response.text


def test_task_index_picks_that_goal_without_wrapping(client):
    env = gym.make(ENV_ID, **ENV_KWARGS)
    last = env.unwrapped.num_tasks - 1
    _, info = env.reset(seed=0, options={"task_index": last})
    response = client.get(f"/?task_index={last}")
    assert response.status_code == 200 and info["task"] in response.text


def _products_listed(page_text):
    return re.findall(r'class="product-link[^"]*"[^>]*value="click\[([^\]]+)\]"', page_text)


def test_results_and_products_have_bookmarkable_addresses(client):
    path, _ = _start(client, seed=4)
    results = _post(client, path, "search[red nail polish]")
    results_url = str(results.url)
    assert urlsplit(results_url).path == f"{path}/search"
    assert 'id="query"' in results.text and "red nail polish" in results.text  # the query is shown
    products = _products_listed(results.text)
    assert len(products) == 10
    second_page = client.get(f"{path}/search?q=red+nail+polish&page=2")
    assert "Page 2 (Total results:" in second_page.text and _products_listed(second_page.text) != products
    # Elsewhere in the session (a product page of page 2), the bookmarked result page comes back.
    item = _post(client, f"{path}", f"click[{_products_listed(second_page.text)[0]}]")
    assert 'data-page="item_page"' in item.text
    again = client.get(results_url)
    assert again.status_code == 200 and _products_listed(again.text) == products
    # A product's address opens it from anywhere, and its sub-pages have theirs.
    _post(client, path, "click[back to search]")
    asin = products[3].upper()
    item = client.get(f"{path}/item/{asin}?q=red+nail+polish&page=1")
    session = client.app.state.store.get(path.rsplit("/", 1)[1])["env"].unwrapped.session
    assert 'data-page="item_page"' in item.text and session.asin == asin
    features = client.get(f"{path}/item/{asin}/features?q=red+nail+polish&page=1")
    assert 'data-page="item_sub_page"' in features.text
    # Addresses of pages that do not exist are 404 pages.
    assert client.get(f"{path}/item/B000NOSUCH?q=red+nail+polish&page=1").status_code == 404
    assert client.get(f"{path}/item/{asin}?q=red+nail+polish&page=2").status_code == 404
    assert client.get(f"{path}/item/{asin}/manual?q=red+nail+polish&page=1").status_code == 404
    assert client.get(f"{path}/item/{asin}").status_code == 404  # which search it came from is part of it
    assert client.get(f"{path}/search?q=red+nail+polish&page=999").status_code == 404
    assert client.get(f"{path}/search?q=x&page=0").status_code == 400
    # The session's own address redirects to where it is.
    assert client.get(path).url.path == f"{path}/search"


def test_a_purchase_through_addresses_earns_the_text_envs_reward(client):
    """Opening addresses walks the env with the clicks a shopper would make: the same game."""
    path, _ = _start(client, seed=6)
    env = gym.make(ENV_ID, **ENV_KWARGS)
    _, info = env.reset(seed=6)
    search = info["expert_action"]
    query = search[len("search["):-1]
    _, _, _, _, info = env.step(search)
    click = info["expert_action"]
    _, _, _, _, info = env.step(click)
    asin = click[len("click["):-1]
    page = client.get(f"{path}/item/{asin.upper()}", params={"q": " ".join(query.lower().split()), "page": 1})
    assert 'data-page="item_page"' in page.text
    terminated = False
    while not terminated:
        action = info["expert_action"]
        _, reward, terminated, _, info = env.step(action)
        page = _post(client, path, action)
    assert page.url.path == f"{path}/done"
    assert float(re.search(r'data-reward="([0-9.]+)"', page.text).group(1)) == reward
    # After the purchase every address shows the score.
    assert 'id="score"' in client.get(f"{path}/search?q=anything").text


def test_an_unexpected_error_is_a_500_page_without_a_traceback():
    app = create_app(ENV_ID, ENV_KWARGS, max_sessions=2)
    quiet = TestClient(app, raise_server_exceptions=False)
    path, _ = _start(quiet, seed=0)
    state = app.state.store.get(path.rsplit("/", 1)[1])

    def broken(_action):
        raise RuntimeError("boom")
    state["env"].step = broken
    response = _post(quiet, path, "search[shoes]")
    assert response.status_code == 500 and "Traceback" not in response.text and "boom" not in response.text


def test_without_data_the_server_stops_at_start_with_the_data_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("WEBSHOP_DATA",)}
    env["LMGYM_DATA"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-m", "lmgym", "serve", "webshop", "--port", "0"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    first = result.stderr.splitlines()[0]  # the whole error, on one line
    assert first.startswith("lmgym: error: No webshop data found: LMGYM_DATA -> ")
    assert "--env-id lmgym/WebShop-Gen-v0 serves a generated shop" in first


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
