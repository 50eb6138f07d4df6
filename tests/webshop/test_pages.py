"""WebShop's page state machine and its text, text_rich and html renderings (tiny catalogue)."""

import pytest

pytest.importorskip("bm25s", reason="WebShop search needs the webshop extra (bm25s, PyStemmer)")
from webshop_tiny_catalog import tiny_shop  # noqa: E402

from lmgym.envs.webshop import pages as P  # noqa: E402
from lmgym.envs.webshop.goals import goals_for  # noqa: E402

MUG = "B0MUG00003"


@pytest.fixture
def session():
    catalog, index = tiny_shop()
    goal = next(g for g in goals_for(catalog) if g["asin"] == MUG)
    return P.WebShopSession(catalog, index, goal)


def test_search_page(session):
    assert session.page == P.SEARCH and session.has_search_bar
    assert session.clickables() == ["search"]
    assert session.render("text") == f"WebShop [SEP] Instruction: [SEP] {session.instruction} [SEP] Search"
    assert not session.click("search")  # the original never clicks the search button
    assert not session.search("   ")


def test_results_pages_with_next_and_prev(session):
    assert session.search("Ceramic   MUG")
    assert session.keywords == "ceramic mug" and session.page == P.RESULTS
    assert len(session.results) == 24
    first_page = session.page_products()
    assert len(first_page) == 10
    assert session.clickables() == ["back to search", "next >"] + [a.lower() for a in first_page]
    text = session.render("text")
    assert text.startswith(f"Instruction: [SEP] {session.instruction} [SEP] Back to Search "
                           "[SEP] Page 1 (Total results: 24) [SEP] Next > [SEP] ")
    product = session.catalog.by_asin[first_page[0]]
    assert f"[SEP] {first_page[0]} [SEP] {product['Title']} [SEP] {product['Price']}" in text
    assert session.click("Next >") and session.page_num == 2
    assert "< prev" in session.clickables() and "next >" in session.clickables()
    assert session.click("next >") and session.page_num == 3
    assert len(session.page_products()) == 4 and "next >" not in session.clickables()
    assert not session.click("next >")  # no Next on the last page: nothing changes
    assert session.click("< prev") and session.page_num == 2


def test_item_page_options_sub_pages_and_back(session):
    session.search("ceramic mug number 3")
    assert session.page_products()[0] == MUG
    assert session.click(MUG.lower())
    assert session.page == P.ITEM and session.asin == MUG
    assert session.clickables() == ["back to search", "< prev", "description", "features", "reviews", "buy now",
                                    "navy blue", "red | white", "small", "large"]
    text = session.render("text")
    assert text.endswith("[SEP] Back to Search [SEP] < Prev [SEP] color [SEP] navy blue [SEP] red | white [SEP] size "
                         "[SEP] small [SEP] large [SEP] Ceramic Coffee Mug number 3 [SEP] Price: $12.0 [SEP] "
                         "Rating: 4.5 [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now")
    assert session.click("Navy Blue") and session.options == {"color": "navy blue"}
    assert session.click("large") and session.options == {"color": "navy blue", "size": "large"}
    assert session.click("description") and session.page == P.ITEM_SUB
    assert session.render("text").endswith("[SEP] < Prev [SEP] A ceramic mug, model 3, dishwasher safe.")
    assert session.clickables() == ["back to search", "< prev"]
    assert session.click("< prev") and session.page == P.ITEM
    assert session.options == {"color": "navy blue", "size": "large"}  # kept across sub-pages
    session.click("features")
    assert session.render("text").endswith("Holds 13 ounces of coffee [SEP] Dishwasher safe")
    session.click("< prev")
    session.click("reviews")
    assert session.render("text").endswith("No reviews found")
    session.click("< prev")
    assert session.click("< prev") and session.page == P.RESULTS and session.options == {}
    assert session.visited == [MUG]
    assert session.click("back to search") and session.page == P.SEARCH and session.visited == []


def test_attributes_sub_page_only_with_show_attrs(session):
    session.search("ceramic mug number 3")
    session.click(MUG)
    assert not session.click("attributes")
    session.show_attrs = True
    assert session.click("attributes")
    assert session.render("text").endswith("dishwasher safe [SEP] microwave safe [SEP] garden [SEP] coffee mugs [SEP] "
                                           "Home & Kitchen › Kitchen & Dining › Dining › Cups › Mugs")


def test_buy_now_ends_the_visit(session):
    session.search("ceramic mug number 3")
    session.click(MUG)
    session.click("small")
    assert session.click("Buy Now")
    assert session.done and session.clickables() == []
    assert session.purchase == {"asin": MUG, "options": {"size": "small"}, "price": 12.0}
    session.purchase["reward"] = 0.5
    assert session.render("text") == "Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] 0.5"
    assert not session.click("back to search") and not session.search("mug")


def test_text_rich_marks_buttons_clicked_options_and_visited_products(session):
    session.search("ceramic mug number 3")
    session.click(MUG)
    session.click("navy blue")
    session.click("small")
    rich = session.render("text_rich")
    assert rich.startswith("You have clicked small.\nYou have clicked navy blue.\nInstruction:\n")
    assert "[button] Back to Search [button_]" in rich and "[button] Buy Now [button_]" in rich
    assert "  [clicked button] navy blue [clicked button_]" in rich and "  [button] large [button_]" in rich
    session.click("< prev")
    rich = session.render("text_rich")
    assert f"\n[clicked button] {MUG} [clicked button_]" in rich
    other = session.page_products()[1]
    assert f"\n[button] {other} [button_]" in rich


def test_html_escapes_text_and_posts_the_action_strings():
    catalog, index = tiny_shop()
    goal = {"instruction_text": "find a <b>lamp</b> & more", "asin": "B0ODD00001"}
    session = P.WebShopSession(catalog, index, goal)
    page = session.render("html")
    assert "find a &lt;b&gt;lamp&lt;/b&gt; &amp; more" in page and "<b>lamp" not in page
    assert 'id="search_input"' in page and 'value="search"' in page
    session.search("bold quoted lamp")
    page = session.render("html")
    assert "&lt;b&gt;Bold&lt;/b&gt; &amp; &quot;quoted&quot; lamp" in page
    assert 'class="product-link" type="submit" name="action" value="click[b0odd00001]"' in page
    session.click("b0odd00001")
    session.click("description")
    page = session.render("html")
    assert "&lt;script&gt;" in page and "<script>" not in page
    assert 'value="click[&lt; prev]"' in page


def test_an_option_value_shared_by_two_options_selects_the_later_one():
    catalog, index = tiny_shop()
    mug = catalog.by_asin[MUG]
    mug["options"] = {"color": ["navy blue", "one size"], "size": ["one size", "large"]}
    session = P.WebShopSession(catalog, index, {"instruction_text": "x", "asin": MUG})
    session.search("ceramic mug number 3")
    session.click(MUG)
    assert session.click("one size") and session.options == {"size": "one size"}


def test_unknown_render_mode(session):
    with pytest.raises(ValueError, match="observation mode"):
        session.render("pdf")
