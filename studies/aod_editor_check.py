"""How well the tiny editor imitates its teacher on contexts it was not trained on.

Demonstrations as examples/train_aod_editor.py builds them, on seeds 2_000_000 + k (training
used 1_000_000 + k, k < per-task count), per task and context kind; for each, the editor's edit
(temperature 0) is compared with the teacher's: the share the env's grammar accepts, the share
equal to the teacher's edit (the feedback contexts have one right answer; the others are random
draws, so only validity and "is a library sentence" are meaningful there).

    python studies/aod_editor_check.py --per-task 40

`run(quick)` returns the rates per task and context kind (quick: one context of each kind per
task). Needs LMGYM_DATA (the PromptEdit tasks).
"""

import argparse
import json

import numpy as np

from lmgym.agents.prompt_search.editor import DEFAULT_EDITOR, LMEditor, edit_context
from lmgym.agents.prompt_search.teacher import MUTATION_INSTRUCTIONS, teacher_edit
from lmgym.envs.promptedit.edits import EditLibrary, apply_edit
from lmgym.envs.promptedit.generators import RuleBasedGenerator
from lmgym.envs.promptedit.judge import JudgeCluster
from lmgym.envs.promptedit.tasks import LOADERS, load_task
from lmgym.stats import wilson_interval

KINDS = ("feedback", "instruction", "blind")


def run(quick: bool = False, per_task: int = 40, editor: str = DEFAULT_EDITOR) -> dict:
    """{"<task>/<kind>": {n, valid, valid_ci95, teacher, teacher_ci95, library_sentence}};
    quick: one context of each kind per task."""
    per_task = len(KINDS) if quick else per_task
    model = LMEditor(editor, temperature=0.0)
    counts: dict[str, list[int]] = {}
    for name in sorted(LOADERS):
        task = load_task(name)
        library, generator, judge = EditLibrary(task), RuleBasedGenerator(task), JudgeCluster(task)
        sentences = {library.command(i, task.initial_prompt) for i in range(len(library.entries) - 2)}
        for k in range(per_task):
            rng = np.random.default_rng(2_000_000 + k)
            prompt = task.initial_prompt
            for _ in range(int(rng.integers(4))):
                commands = [c for c in library.admissible_commands(prompt) if c.startswith("append")]
                prompt = apply_edit(prompt, commands[int(rng.integers(len(commands)))]).prompt
            kind = KINDS[k % len(KINDS)]
            feedback = judge.evaluate(generator.generate([prompt], 8, 2_000_000 + k)).feedback if kind == "feedback" else None
            instruction = MUTATION_INSTRUCTIONS[k % len(MUTATION_INSTRUCTIONS)] if kind == "instruction" else None
            target = teacher_edit(library, prompt, rng, feedback=feedback, instruction=instruction)
            [edit] = model.write([edit_context(task.description, prompt, feedback=feedback, instruction=instruction)], seed=k)
            row = counts.setdefault(f"{name}/{kind}", [0, 0, 0, 0])
            row[0] += 1
            row[1] += apply_edit(prompt, edit).valid
            row[2] += edit == target
            row[3] += edit in sentences
    return {key: {"n": n, "valid": valid / n, "valid_ci95": wilson_interval(valid, n), "teacher": same / n,
                  "teacher_ci95": wilson_interval(same, n), "library_sentence": library_sentence / n}
            for key, (n, valid, same, library_sentence) in sorted(counts.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-task", type=int, default=40)
    parser.add_argument("--editor", default=DEFAULT_EDITOR)
    args = parser.parse_args()
    result = run(per_task=args.per_task, editor=args.editor)
    for key, r in result.items():
        print(f"{key:<26} n={r['n']:<3} valid {r['valid']:.2f}  = teacher {r['teacher']:.2f}  "
              f"library sentence {r['library_sentence']:.2f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
