"""The ReAct prompt of ALFWorld and ALFWorld-Gen (`lmgym.react.ReActPrompt`).

The grammar is the env's (`lmgym.envs.alfworld.env`, Action Space); ReAct's older
``put X in/on Y`` is accepted by the env too. Demonstrations: the grounded teacher on
ALFWorld-Gen training seeds (no data needed).
"""

from lmgym.react import DemonstrationSource, ReActPrompt

PROMPT = ReActPrompt(
    family="ALFWorld",
    instructions=(
        "You are an agent in a household. Solve the task by interacting with the room. Each turn, read the "
        "observation, then write one line of reasoning and one command:\n"
        "Thought: <your reasoning>\n"
        "Action: <one command>\n"
        "Commands: go to X, open X, close X, take O from X, move O to X, heat O with X, cool O with X, "
        "clean O with X, use X, examine X, look, inventory. Use the exact names the observations give, "
        'such as "cabinet 3" or "apple 1".\n'),
    demonstrations=DemonstrationSource("lmgym/ALFWorld-Gen-v0", agent="teacher", count=2, max_steps=14),
    max_new_tokens=64,
)
