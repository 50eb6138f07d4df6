"""The ReAct prompt of HotPotQA search and HotPotQA-Gen (`lmgym.react.ReActPrompt`).

The grammar is the env's (`lmgym.envs.hotpotqa.env`, Action Space). Answers and lookup
keywords are free text, never snapped to a listed action. Demonstrations: the grounded
teacher on HotPotQA-Gen training seeds.
"""

from lmgym.react import DemonstrationSource, ReActPrompt

PROMPT = ReActPrompt(
    family="HotPotQA",
    instructions=(
        "Answer a question by searching an encyclopedia. Each turn, read the observation, then write one line "
        "of reasoning and one action:\n"
        "Thought: <your reasoning>\n"
        "Action: <one action>\n"
        "Actions: search[entity] shows the page of an entity (or similar titles); lookup[keyword] shows the "
        "next sentence of the current page that contains the keyword; finish[answer] ends with your answer "
        "(a short span, or yes/no).\n"),
    demonstrations=DemonstrationSource("lmgym/HotPotQA-Gen-v0", agent="teacher", count=2, max_steps=7),
    free_form_verbs=("finish", "lookup"),
    max_new_tokens=64,
)
