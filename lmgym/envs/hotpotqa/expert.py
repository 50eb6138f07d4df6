"""The expert: follow the supporting facts from any state, one reasoning line per step.

Plan for a question with hops ``T1 .. Tn`` (`Question.hops`): ``search[T1]``; where ``T1``'s
page names ``T2``, ``lookup[<T2's name>]`` on it (the bridge sentence); ``search[T2]``; ...;
``finish[<gold answer>]``. Comparison questions search both pages and finish. In passages
mode there is no page to look up on, so the plan only searches and finishes.

From any state the expert takes the first plan step not yet done: a search is done once that
page was shown or that query searched (so a passages search that missed its page is not
repeated); a lookup is done once that keyword was looked up on that page, and is skipped when the
agent has moved to another page. The expert knows the gold answer, as ALFWorld's expert knows
the PDDL plan: it is a demonstrator, and its EM measures whether the plan fits the step limit
and the env honours it.
"""

from __future__ import annotations

from lmgym.envs.hotpotqa.corpus import Question
from lmgym.envs.hotpotqa.engine import SearchState


def expert_step(question: Question, state: SearchState, *, search_mode: str = "page") -> tuple[str, str]:
    """(action, one-line reasoning) that advances the plan from `state`."""
    for i, title in enumerate(question.hops):
        if title not in state.visited and title.lower() not in state.searched:
            return f"search[{title}]", _search_reason(question, i)
        keyword = question.bridge_keywords[i] if i < len(question.bridge_keywords) else ""
        if (search_mode == "page" and keyword and state.page_title == title
                and state.lookup_keyword != keyword):
            return f"lookup[{keyword}]", f"I look up {keyword} in {title} to see how it leads on."
    return f"finish[{question.answer}]", _finish_reason(question)


def _search_reason(question: Question, hop: int) -> str:
    title = question.hops[hop]
    if question.type == "comparison":
        which = "first" if hop == 0 else "second"
        return f"The question compares two things; I search the {which}, {title}."
    if hop == 0:
        return f"The question starts from {title}; I search its page."
    return f"{question.hops[hop - 1]} leads to {title}; I search {title} next."


def _finish_reason(question: Question) -> str:
    pages = " and ".join(question.hops) if question.hops else "the pages I read"
    return f"From {pages} the answer is {question.answer}."
