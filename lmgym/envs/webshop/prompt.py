"""The ReAct prompt of WebShop and WebShop-Gen (`lmgym.react.ReActPrompt`).

The grammar is the env's (`lmgym.envs.webshop.env`, Action Space). Search keywords are free
text, never snapped. Demonstrations: the grounded teacher on one WebShop-Gen training seed
(a page is long: one demonstration keeps the prompt short).
"""

from lmgym.react import DemonstrationSource, ReActPrompt

PROMPT = ReActPrompt(
    family="WebShop",
    instructions=(
        "You are shopping online for the product an instruction describes. Each turn, read the page, then "
        "write one line of reasoning and one action:\n"
        "Thought: <your reasoning>\n"
        "Action: <one action>\n"
        "Actions: search[keywords] on the search page; click[value] where value is a button or option on the "
        "page, such as click[b0123abcd], click[large] or click[buy now]. Buy the product whose options and "
        "price match the instruction.\n"),
    demonstrations=DemonstrationSource("lmgym/WebShop-Gen-v0", agent="teacher", count=1, max_steps=8),
    free_form_verbs=("search",),
    max_new_tokens=64,
)
