"""WebShop search: the original's index text, a Lucene-like analyzer, BM25 top 50, determinism."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("bm25s", reason="WebShop search needs the webshop extra (bm25s, PyStemmer)")
from webshop_tiny_catalog import tiny_catalog, tiny_shop  # noqa: E402

from lmgym.data import DataNotFoundError  # noqa: E402
from lmgym.envs.webshop import search as S  # noqa: E402


def test_document_text_is_the_original_index_text():
    mug = tiny_catalog().by_asin["B0MUG00003"]
    # convert_product_file_format.py: Title, Description, first bullet, option text; lower-cased.
    assert S.document_text(mug) == (
        "ceramic coffee mug number 3 a ceramic mug, model 3, dishwasher safe. holds 13 ounces of coffee "
        "color: navy blue, red | white, and size: small, large"
    )


def test_analyzer_mirrors_lucene_english():
    assert S.analyze("The Women's Shoes, L'eau d'Issey 6.76 fl oz") == ["women", "shoe", "l'eau", "d'issei",
                                                                        "6.76", "fl", "oz"]
    assert S.analyze("a the of and") == []
    # Lucene's PorterStemmer leaves words of one or two letters alone; Snowball's would make "s" "".
    assert S.analyze("s es us xl ties") == ["s", "es", "us", "xl", "ti"]


def test_queries_with_one_letter_words_search_instead_of_raising():
    """A model wrote `search[s 3 mug]`: the "" that Snowball made of "s" is bm25s's placeholder
    token, whose id lies past the score matrix, and bm25s raised ValueError mid-episode."""
    _, index = tiny_shop()
    assert index.search("s ceramic mug")[:3] == index.search("ceramic mug")[:3]
    assert index.search("s") == []


def test_search_ranks_matching_products_and_caps_at_50():
    _, index = tiny_shop()
    results = index.search("waterproof tent")
    assert results[0] == "B0TENT0001"
    assert index.search("ceramic mug")[:1] != ["B0TENT0001"]
    assert len(index.search("ceramic mug")) == 24  # only matching products, never padding
    assert index.search("zzzz unknownword") == [] and index.search("the") == []
    assert len(index.search("mug", k=5)) == 5


def test_ties_keep_catalogue_order():
    _, index = tiny_shop()
    # every mug has "dishwasher safe" once in an equally long document part: scores tie often;
    # whatever the scores, equal ones must come out in catalogue order.
    scores = index.retriever.get_scores([index.retriever.vocab_dict[t] for t in S.analyze("dishwasher")])
    results = index.search("dishwasher")
    positions = [index.asins.index(a) for a in results]
    for first, second in zip(positions, positions[1:]):
        assert scores[first] > scores[second] or (scores[first] == scores[second] and first < second)


def test_results_are_identical_across_processes():
    code = ("from lmgym.envs.webshop.catalog import load_catalog;"
            "from lmgym.envs.webshop.search import index_for;"
            "print(index_for(load_catalog()).search('machine washable decorative pillows 28 x 28'))")
    try:
        from lmgym.envs.webshop.catalog import load_catalog
        expected = S.index_for(load_catalog()).search("machine washable decorative pillows 28 x 28")
    except DataNotFoundError as error:
        pytest.skip(f"no WebShop data: {error}")
    # One other process with a fixed hash seed (this one's is random unless set).
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONHASHSEED": "1"}).stdout
    assert output == f"{expected}\n"
    assert len(expected) == S.SEARCH_RETURN_N


def test_index_is_cached_per_catalogue():
    catalog = tiny_catalog()
    assert S.index_for(catalog) is S.index_for(catalog)
    assert S.index_for(tiny_catalog()) is not S.index_for(catalog)
