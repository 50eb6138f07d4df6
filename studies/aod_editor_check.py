"""How well the tiny editor imitates its teacher on contexts it was not trained on.

Demonstrations as examples/train_aod_editor.py builds them, on seeds 2_000_000 + k (training
used 1_000_000 + k, k < per-task count), per task and context kind; for each, the editor's edit
(temperature 0) is compared with the teacher's: the share the env's grammar accepts, the share
equal to the teacher's edit (the feedback contexts have one right answer; the others are random
draws, so only validity and "is a library sentence" are meaningful there).

    python studies/aod_editor_check.py --per-task 40
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from lmgym.agents.prompt_search.editor import DEFAULT_EDITOR, LMEditor, edit_context  # noqa: E402
from lmgym.agents.prompt_search.teacher import MUTATION_INSTRUCTIONS, teacher_edit  # noqa: E402
from lmgym.benchmarks.report import wilson_interval  # noqa: E402
from lmgym.envs.promptedit.edits import EditLibrary, apply_edit  # noqa: E402
from lmgym.envs.promptedit.generators import RuleBasedGenerator  # noqa: E402
from lmgym.envs.promptedit.judge import JudgeCluster  # noqa: E402
from lmgym.envs.promptedit.tasks import LOADERS, load_task  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--per-task", type=int, default=40)
parser.add_argument("--editor", default=DEFAULT_EDITOR)
args = parser.parse_args()
editor = LMEditor(args.editor, temperature=0.0)
counts: dict[str, list[int]] = {}
for name in sorted(LOADERS):
    task = load_task(name)
    library, generator, judge = EditLibrary(task), RuleBasedGenerator(task), JudgeCluster(task)
    sentences = {library.command(i, task.initial_prompt) for i in range(len(library.entries) - 2)}
    for k in range(args.per_task):
        rng = np.random.default_rng(2_000_000 + k)
        prompt = task.initial_prompt
        for _ in range(int(rng.integers(4))):
            commands = [c for c in library.admissible_commands(prompt) if c.startswith("append")]
            prompt = apply_edit(prompt, commands[int(rng.integers(len(commands)))]).prompt
        kind = ("feedback", "instruction", "blind")[k % 3]
        feedback = judge.evaluate(generator.generate([prompt], 8, 2_000_000 + k)).feedback if kind == "feedback" else None
        instruction = MUTATION_INSTRUCTIONS[k % len(MUTATION_INSTRUCTIONS)] if kind == "instruction" else None
        target = teacher_edit(library, prompt, rng, feedback=feedback, instruction=instruction)
        [edit] = editor.write([edit_context(task.description, prompt, feedback=feedback, instruction=instruction)], seed=k)
        row = counts.setdefault(f"{name}/{kind}", [0, 0, 0, 0])
        row[0] += 1
        row[1] += apply_edit(prompt, edit).valid
        row[2] += edit == target
        row[3] += edit in sentences
result = {}
for key, (n, valid, same, library_sentence) in sorted(counts.items()):
    result[key] = {"n": n, "valid": valid / n, "valid_ci95": wilson_interval(valid, n), "teacher": same / n,
                   "teacher_ci95": wilson_interval(same, n), "library_sentence": library_sentence / n}
    print(f"{key:<26} n={n:<3} valid {valid}/{n}  = teacher {same}/{n}  library sentence {library_sentence}/{n}")
print(json.dumps(result))
