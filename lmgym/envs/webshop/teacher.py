"""The grounded WebShop teacher: shops by what the pages show, not by the goal's hidden product.

`lmgym.envs.webshop.expert` knows the goal's asin and pages to it. This teacher reads only
the instruction (``info["task"]``), the pages (``observation_mode="text"``: strings joined by
`` [SEP] ``) and the clickables in ``info["admissible_actions"]``:

1. Search page: it types the instruction without its price clause (the query the env
   offers as ``search[...]``; the original's IL baseline searches the instruction too).
2. Results page: it opens the best-ranked product it has not opened yet whose listed price
   fits the instruction's limit; when none is left on the page it goes to the next page.
3. Item page: it reads the option groups. When the instruction asks for option values
   (``with color: brown, and size: medium``) and the page does not offer one of them, this
   is not the product: it goes back and opens the next best, up to `MAX_PRODUCTS` products.
   Otherwise it clicks each asked value not yet chosen (human instructions name values
   without option names: it clicks a value whose words the instruction holds), then
   ``Buy Now``; it buys by `BUY_BY` actions at the latest, inside the 15-step budget.

Every step returns (action, one reasoning line citing what the page showed). A product link
is clicked by its asin exactly as the page and the reasoning show it (``click[B7S0GWCJR8]``;
clicks are case-insensitive): a model imitating the teacher copies the id, where the lower-cased
form the original's agents write would ask it to transform ten random characters, which tiny
models trained here failed at (docs/distill.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from lmgym.envs.webshop.pages import BACK_TO_SEARCH, END_BUTTON, NEXT_PAGE, PREV_PAGE, SUB_PAGES

SEP = " [SEP] "
#: Products opened at most before settling for the best seen (each miss costs two steps).
MAX_PRODUCTS = 5
#: The last action the teacher may buy on (WebShop-v0 truncates after 15, ReAct's budget): on
#: an item page at action a it still tries another product only if back (a), open (a+1), the
#: options (k) and buy fit: a + 3 + k <= BUY_BY.
BUY_BY = 15
_PRICE_LIMIT = re.compile(r",? and price lower than (?P<p>[\d.,]+) dollars\.?$", re.I)
#: " with name: value, and name: value" at the end of a synthetic instruction (names <= 3 words).
_OPTION_CLAUSE = re.compile(r" with (?=(?:[\w&'-]+ ){0,2}[\w&'-]+: )")
_OPTION_SPLIT = re.compile(r", and (?=(?:[\w&'-]+ ){0,2}[\w&'-]+: )")
_PRICE = re.compile(r"\$(?P<p>[\d,]+(?:\.\d+)?)")
_RESULTS = re.compile(r"^Page (?P<n>\d+) \(Total results: (?P<total>\d+)\)$")
_BUTTONS = {b.lower() for b in (BACK_TO_SEARCH, NEXT_PAGE, PREV_PAGE, END_BUTTON, *SUB_PAGES)}


@dataclass(frozen=True)
class Want:
    """What an instruction asks for, read from its text."""

    description: str  # the product words (no options, no price)
    options: dict[str, str]  # option name -> value (synthetic instructions), else empty
    price_limit: float | None


def read_instruction(instruction: str) -> Want:
    text = instruction.strip()
    limit = None
    if match := _PRICE_LIMIT.search(text):
        limit = float(match["p"].replace(",", ""))
        text = text[:match.start()]
    options: dict[str, str] = {}
    if match := _OPTION_CLAUSE.search(text):
        for part in _OPTION_SPLIT.split(text[match.end():]):
            name, _, value = part.partition(": ")
            options[name.strip().lower()] = value.strip().lower()
        text = text[:match.start()]
    return Want(text, options, limit)


def lowest_price(text: str) -> float | None:
    """``"$12.99"`` -> 12.99; a range ``"$10.0 to $20.0"`` -> its low end."""
    prices = [float(m["p"].replace(",", "")) for m in _PRICE.finditer(text)]
    return min(prices) if prices else None


def short(title: str, words: int = 8) -> str:
    parts = title.split()
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


@dataclass
class Listing:
    asin: str
    title: str
    price: float | None


@dataclass
class ItemPage:
    title: str
    price: float | None
    options: dict[str, list[str]]  # option name -> values, in page order


def parse_results(parts: list[str], clickable: set[str]) -> list[Listing]:
    listings = []
    for i, part in enumerate(parts):
        if part.lower() in clickable and part.lower() not in _BUTTONS and i + 2 < len(parts):
            listings.append(Listing(part, parts[i + 1], lowest_price(parts[i + 2])))
    return listings


def parse_item(parts: list[str], clickable: set[str]) -> ItemPage | None:
    price_at = next((i for i, p in enumerate(parts) if p.startswith("Price: ")), None)
    if price_at is None or price_at == 0:
        return None
    start = parts.index(PREV_PAGE) + 1 if PREV_PAGE in parts else 0
    options: dict[str, list[str]] = {}
    name = None
    for part in parts[start:price_at - 1]:
        if part.lower() in clickable and name is not None:
            options[name].append(part)
        else:
            name = part.lower()
            options[name] = []
    return ItemPage(parts[price_at - 1], lowest_price(parts[price_at]), options)


@dataclass
class ShopMemory:
    opened: list[str] = field(default_factory=list)  # asins opened, in order
    chosen: dict[str, str] = field(default_factory=dict)  # option -> value clicked on the current item
    actions: int = 0


class WebShopTeacher:
    """``act(observation, info) -> (action, reasoning)`` from the pages shown."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.memory = ShopMemory()
        self.last_action: str | None = None
        self._item: ItemPage | None = None  # the item page shown last
        self._page = "search"  # what the last observation was: search, results, item or other

    def act(self, observation: str, info: Mapping[str, Any]) -> tuple[str, str]:
        want = read_instruction(info["task"])
        admissible = info.get("admissible_actions") or []
        clickable = {a[6:-1] for a in admissible if a.startswith("click[")}
        if self.last_action and self.last_action.startswith("click[") and info.get("action_valid", True):
            self._remember_click(self.last_action[6:-1].lower())
        action, reasoning = self._decide(observation, want, admissible, clickable)
        self.memory.actions += 1
        self.last_action = action
        return action, reasoning

    def _remember_click(self, value: str) -> None:
        """What a valid click changed (text pages do not mark the chosen options)."""
        memory = self.memory
        if self._page == "item" and self._item is not None:
            option = next((n for n, vs in self._item.options.items() if value in (v.lower() for v in vs)), None)
            if option is not None:
                memory.chosen[option] = value
            elif value in (PREV_PAGE.lower(), BACK_TO_SEARCH.lower()):  # the original forgets the options
                memory.chosen = {}
        elif self._page == "results" and value not in _BUTTONS:  # a product link
            memory.opened.append(value)
            memory.chosen = {}

    def _decide(self, observation: str, want: Want, admissible: list[str],
                clickable: set[str]) -> tuple[str, str]:
        if SEP not in observation and "\n" in observation:
            raise ValueError("the WebShop teacher reads observation_mode='text' pages (strings joined by ' [SEP] ')")
        searches = [a for a in admissible if a.startswith("search[")]
        if searches:
            self._page = "search"
            return searches[0], "I search for the instruction's words without the price clause."
        parts = [p.strip() for p in observation.split(SEP) if p.strip()]
        if any(_RESULTS.match(p) for p in parts):
            self._page = "results"
            return self._results(parts, want, clickable)
        item = parse_item(parts, clickable)
        if item is not None:
            self._page, self._item = "item", item
            return self._item_page(item, want, clickable)
        self._page = "other"
        if PREV_PAGE.lower() in clickable:  # a Description/Features/Reviews page
            return f"click[{PREV_PAGE.lower()}]", "I have read this; back to the item page."
        return f"click[{BACK_TO_SEARCH.lower()}]", "This page shows nothing to buy; I go back to the search page."

    # -- results -------------------------------------------------------------------------
    def _results(self, parts: list[str], want: Want, clickable: set[str]) -> tuple[str, str]:
        """Open the highest-ranked result not yet opened that fits the price limit. The
        search ranks by the instruction's words over title, description and option text,
        which the page does not show; on the train goals that order finds the product more
        often than re-ranking by the titles' share of instruction words (docs/teachers.md)."""
        listings = parse_results(parts, clickable)
        fresh = [x for x in listings if x.asin.lower() not in self.memory.opened]
        affordable = [x for x in fresh if want.price_limit is None or x.price is None or x.price <= want.price_limit]
        if not affordable:
            if NEXT_PAGE.lower() in clickable and len(self.memory.opened) < MAX_PRODUCTS:
                return f"click[{NEXT_PAGE.lower()}]", "No product left on this page fits the price limit; I look at the next page."
            pick = (fresh or listings)[0]
            return f"click[{pick.asin}]", f"No product here fits the price limit; {pick.asin} is the top result."
        best = affordable[0]
        rank = listings.index(best) + 1
        price = f"${best.price:g}" if best.price is not None else "no listed price"
        budget = f", under ${want.price_limit:.2f}" if want.price_limit is not None and best.price is not None else ""
        which = "the top result" if rank == 1 else f"result {rank}, the best-ranked one I have not ruled out,"
        return (f"click[{best.asin}]",
                f"{best.asin} \"{short(best.title)}\" is {which} and costs {price}{budget}; I open it.")

    # -- the item page -----------------------------------------------------------------
    def _item_page(self, item: ItemPage, want: Want, clickable: set[str]) -> tuple[str, str]:
        memory = self.memory
        offered = {n: [v.lower() for v in vs] for n, vs in item.options.items()}
        last_chance = len(memory.opened) >= MAX_PRODUCTS or memory.actions + 3 + len(want.options) > BUY_BY
        missing = [(n, v) for n, v in want.options.items() if v not in offered.get(n, ())]
        over = want.price_limit is not None and item.price is not None and item.price > want.price_limit
        if (missing or over) and not last_chance:
            why = (f"it offers no {missing[0][0]} {missing[0][1]}" if missing
                   else f"its price ${item.price:g} is over ${want.price_limit:.2f}")
            return f"click[{PREV_PAGE.lower()}]", f"This is not the product: {why}. I go back to the results."
        for name, value in self._choices(want, offered).items():
            if memory.chosen.get(name) != value and value in clickable:
                return f"click[{value}]", f"The instruction asks for {name} {value}; the page offers it, so I choose it."
        price = f"${item.price:g}" if item.price is not None else "its price"
        if missing:
            return "click[buy now]", (f"No product I opened offers every option asked; this one is the closest at "
                                      f"{price}, so I buy it.")
        return "click[buy now]", f"The options asked for are chosen and {price} is within the budget; I buy it."

    @staticmethod
    def _choices(want: Want, offered: dict[str, list[str]]) -> dict[str, str]:
        """Option -> value to click: the values the instruction names (synthetic goals), or for
        each option the longest value whose words all occur in the instruction (human goals)."""
        if want.options:
            return {n: v for n, v in want.options.items() if v in offered.get(n, ())}
        words = set(re.findall(r"[\w'.-]+", want.description.lower()))
        choices = {}
        for name, values in offered.items():
            fitting = [v for v in values if v and set(re.findall(r"[\w'.-]+", v)) <= words]
            if fitting:
                choices[name] = max(fitting, key=len)
        return choices
