"""WebShop's expert: find the goal product by search, choose the goal options, buy it.

The expert reads the env's privileged state (the goal's asin and options) but acts only
through the page's own actions, so its transcripts are valid demonstrations:

1. On the search page it types the instruction without its price clause; when that query's
   top 50 does not hold the goal product, it types the product's title instead (the original
   IL baseline's ``go_to_search`` also searches the goal's name, baseline_models/env.py).
2. On result pages it pages with ``Next >`` / ``< Prev`` to the product and opens it.
3. On the item page it clicks each goal option value not yet chosen, then ``Buy Now``.
   The product's price is always within the goal's bound (goals are built that way).

When neither query surfaces the product, the expert opens the best result and buys it with
whichever goal option values it offers: the reward then is partial, never 1.0.
"""

from __future__ import annotations

from lmgym.envs.webshop.goals import goal_option_choices
from lmgym.envs.webshop.pages import ITEM, ITEM_SUB, RESULTS, SEARCH, WebShopSession

PRICE_CLAUSE = ", and price lower than"


def instruction_query(instruction: str) -> str:
    """The instruction without the price clause, lower-cased (what the expert types first)."""
    return instruction.split(PRICE_CLAUSE)[0].lower()


def expert_queries(session: WebShopSession) -> list[str]:
    """The queries the expert may type, in order: the instruction, then the product's title."""
    return [instruction_query(session.instruction), session.goal["name"].lower()]


def reachable_query(session: WebShopSession) -> str | None:
    """The first of `expert_queries` whose results hold the goal product, or None."""
    target = session.goal["asin"]
    for query in expert_queries(session):
        if target in session.index.search(query):
            return query
    return None


def expert_step(session: WebShopSession) -> tuple[str, str] | None:
    """The expert's next (action, one-line reasoning) from the current page; None when done."""
    goal = session.goal
    target = goal["asin"]
    if session.page == SEARCH:
        query = reachable_query(session)
        if query is None:
            query = expert_queries(session)[0]
            return f"search[{query}]", "No query I know surfaces the product; I search the instruction and take the best result."
        if query == expert_queries(session)[0]:
            return f"search[{query}]", "I search for the instruction's words without the price clause."
        return f"search[{query}]", "The instruction's words do not surface the product, so I search for its title."
    if session.page == RESULTS:
        if target in session.results:
            wanted_page = session.results.index(target) // 10 + 1
            if wanted_page == session.page_num:
                return f"click[{target.lower()}]", f"{target} matches the instruction; I open it."
            if wanted_page > session.page_num:
                return "click[next >]", f"The product I want is on result page {wanted_page}; I go forward."
            return "click[< prev]", f"The product I want is on result page {wanted_page}; I go back."
        if reachable_query(session) is not None and session.keywords != reachable_query(session):
            return "click[back to search]", "The product is not among these results; I search again with other words."
        if session.page_products():
            best = session.page_products()[0]
            return f"click[{best.lower()}]", f"No search finds the exact product; {best} is the closest result."
        return "click[back to search]", "This page lists nothing; I go back to the search page."
    if session.page == ITEM_SUB:
        return "click[< prev]", "I have read this; back to the item page."
    if session.page == ITEM:
        product = session.product
        if product["asin"] != target and reachable_query(session) is not None:
            return "click[< prev]", "This is not the product I want; back to the results."
        targets = session.clickable_targets()
        for name, value in goal_option_choices(goal, product).items():
            if value not in product["options"].get(name, ()):
                continue
            # A value offered by two options selects the later one (see clickable_targets):
            # skip it once that click has been made, so the expert never loops.
            _, selects = targets[value]
            if session.options.get(selects) != value:
                return f"click[{value}]", f"The instruction asks for {name} {value}."
        return "click[buy now]", "The product and its options match the instruction and the price is within budget."
    return None
