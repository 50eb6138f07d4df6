"""The edit grammar, the edit library, the env's dynamics and the Discrete wrapper."""

import json

import gymnasium as gym
import numpy as np
import pytest

import lmgym  # noqa: F401  registers the ids
from lmgym.data import data_root
from lmgym.envs.promptedit.edits import (
    FORMAT_SENTENCE,
    EditLibrary,
    apply_edit,
    specified_prompt,
    split_sentences,
)
from lmgym.envs.promptedit.env import EditLibraryActions, PromptEditEnv
from lmgym.envs.promptedit.generators import RuleBasedGenerator, compact_record, training_pairs
from lmgym.envs.promptedit.judge import METRIC_KEYS
from lmgym.envs.promptedit.metrics import parse_record
from lmgym.envs.promptedit.phrasings import find_cues, specified_prompt_in
from lmgym.envs.promptedit.tasks import load_task

needs_truthfulqa = pytest.mark.skipif(
    data_root() is None or not (data_root() / "truthfulqa").exists(), reason="needs LMGYM_DATA/truthfulqa")
#: the fast rule-based stand-in instead of the default masked-diffusion generator
RULES = dict(generator="lmgym.envs.promptedit.generators:RuleBasedGenerator")


def test_sentences_do_not_split_inside_json_or_quotes():
    text = 'Write a record. Example: {"a": "x. y", "b": [1. , 2]} Be brief! "Quoted. Still one." End?'
    assert split_sentences(text) == ["Write a record.", 'Example: {"a": "x. y", "b": [1. , 2]} Be brief!',
                                     '"Quoted. Still one." End?']


@pytest.mark.parametrize("command, expected", [
    ("append: Be brief.", "One. Two. Be brief."),
    ("APPEND:   Be brief.", "One. Two. Be brief."),
    ("delete sentence 1", "Two."),
    ("replace prompt: New prompt.", "New prompt."),
    ('replace "Two" with "Three"', "One. Three."),
])
def test_each_edit_kind(command, expected):
    result = apply_edit("One. Two.", command)
    assert result.valid and result.prompt == expected


@pytest.mark.parametrize("command, reason", [
    ("delete sentence 3", "has 2 sentences"),
    ('replace "Zero" with "x"', "not in the prompt"),
    ("replace prompt:", "empty"),
    ("append: " + "x" * 2000, "exceed"),
    ('replace "One" with "One"', "unchanged"),
    ("make it better", "Invalid edit. Use"),
])
def test_refused_edits_leave_the_prompt_and_say_why(command, reason):
    result = apply_edit("One. Two.", command)
    assert not result.valid and result.prompt == "One. Two." and reason in result.message


@needs_truthfulqa
def test_library_commands_are_admissible_exactly_when_they_change_the_prompt():
    task = load_task("TruthfulQA")
    library = EditLibrary(task)
    prompt = task.initial_prompt
    admissible = library.admissible(prompt)
    assert len(admissible) == len(library.entries) == 2 * len(task.fields) + 3 + 2 + 2
    assert admissible[-2:] == [False, False]  # one sentence: nothing to delete, already the start
    format_index = library.entries.index("tighten the format")
    prompt = apply_edit(prompt, library.command(format_index, prompt)).prompt
    assert FORMAT_SENTENCE in prompt
    admissible = library.admissible(prompt)
    assert not admissible[format_index] and admissible[-2] and admissible[-1]
    assert library.command(len(library) - 2, prompt) == "delete sentence 2"


@needs_truthfulqa
def test_env_reset_step_info_and_refused_edit():
    env = gym.make("lmgym/PromptEdit-TruthfulQA-v0")
    observation, info = env.reset(seed=0)
    assert "Prompt: Write one JSON record" in observation and "Feedback:" in observation and "Samples:" in observation
    assert set(METRIC_KEYS) <= set(info["metrics"]) and info["feedback"] in observation
    assert info["admissible_actions"] == sorted(info["admissible_actions"]) and info["admissible_actions"]
    observation, reward, terminated, truncated, info = env.step("please do better")
    assert reward == 0.0 and not info["action_valid"] and observation.startswith("Invalid edit.")
    observation, reward, terminated, truncated, info = env.step(f"append: {FORMAT_SENTENCE}")
    assert info["action_valid"] and info["prompt"].endswith(FORMAT_SENTENCE) and 0.0 <= reward <= 1.0
    assert not terminated
    env.close()


@needs_truthfulqa
def test_edits_change_what_the_rule_based_generator_writes():
    """Tightening the format and hinting every field lift parse rate and TSR (paired seeds)."""
    env = PromptEditEnv("TruthfulQA", batch_size=32, **RULES)
    task, library = env.task, env.library
    better = task.initial_prompt
    for index, name in enumerate(library.entries):
        if name.startswith("add a field hint") or name == "tighten the format":
            better = apply_edit(better, library.command(index, better)).prompt
    for seed in range(3):
        before, _ = env.evaluate(task.initial_prompt, seed)
        after, _ = env.evaluate(better, seed)
        assert after.metrics["parse_rate"] == 1.0 > before.metrics["parse_rate"]
        assert after.metrics["tsr"] > before.metrics["tsr"] and after.reward > before.reward


@needs_truthfulqa
def test_the_default_diffusion_generator_answers_the_prompt():
    """The frozen MDLM (the registered default) writes valid records when the prompt names every
    field and asks for bare JSON, and incomplete ones for the vague starting prompt."""
    env = gym.make("lmgym/PromptEdit-TruthfulQA-v0").unwrapped
    assert type(env.generator).__name__ == "DiffusionRecordGenerator"
    start = [env.evaluate(env.task.initial_prompt, seed)[0] for seed in range(2)]
    specified = [env.evaluate(specified_prompt(env.task), seed)[0] for seed in range(2)]
    assert all(v.metrics["parse_rate"] >= 0.9 for v in specified)  # measured: 1.0
    assert sum(v.metrics["tsr"] for v in specified) > sum(v.metrics["tsr"] for v in start)
    assert sum(v.reward for v in specified) > sum(v.reward for v in start)


@pytest.mark.skipif(data_root() is None or not (data_root() / "super_natural_instructions").exists(),
                    reason="needs LMGYM_DATA/super_natural_instructions")
def test_the_ar_comparison_generator_answers_the_prompt_in_held_out_phrasings():
    """The committed AR generator writes more valid records when the prompt names every field and
    asks for bare JSON, in train and in held-out phrasings, than for the vague starting prompt
    (measured with 64 records: 0.12 -> 0.62 and 0.53 schema-valid)."""
    env = PromptEditEnv("SuperNI", batch_size=16,
                        generator="lmgym.components.record_generator:AutoregressiveRecordGenerator")
    tsr = lambda prompt: sum(env.evaluate(prompt, seed)[0].metrics["tsr"] for seed in range(2))  # noqa: E731
    start = tsr(env.task.initial_prompt)
    assert tsr(specified_prompt_in(env.task, held_out=False)) > start
    assert tsr(specified_prompt_in(env.task, held_out=True)) > start


@needs_truthfulqa
def test_discrete_wrapper_maps_indices_to_library_edits_with_masks():
    env = EditLibraryActions(gym.make("lmgym/PromptEdit-TruthfulQA-v0"))
    env.reset(seed=1)
    assert env.action_space.n == len(env.unwrapped.library)
    masks = env.action_masks()
    assert masks.dtype == bool and masks.any() and not masks[-1]
    index = int(np.flatnonzero(masks)[0])
    _, _, _, _, info = env.step(index)
    assert info["action_valid"] and not env.action_masks()[index]
    _, reward, _, _, info = env.step(len(env.unwrapped.library) - 1)  # restart: now admissible, valid
    assert info["action_valid"]
    env.close()


@needs_truthfulqa
def test_custom_generator_and_rubric_judge_by_entry_point():
    env = PromptEditEnv("TruthfulQA", batch_size=4, **RULES,
                        rubric_judge="lmgym.envs.promptedit.judge:RuleRubricJudge")
    _, info = env.reset(seed=0)
    assert len(env.samples) == 4 and info["metrics"]["tsr"] >= 0.0
    with pytest.raises(ValueError, match="module:attribute"):
        PromptEditEnv("TruthfulQA", generator="no_colon_here")


@needs_truthfulqa
def test_rule_based_generator_is_a_pure_function_of_its_arguments():
    generator = RuleBasedGenerator("TruthfulQA")
    a = generator.generate(["p one", "p two"], 3, seed=5)
    assert len(a) == 6 and a == generator.generate(["p one", "p two"], 3, seed=5)
    assert a != generator.generate(["p one", "p two"], 3, seed=6)
    # a prompt's texts do not depend on which other prompts share the call
    assert generator.generate(["p two"], 3, seed=5) == a[3:] == generator.generate(["p three", "p two"], 3, seed=5)[3:]


@needs_truthfulqa
def test_training_pairs_vary_the_prompt_and_follow_its_cues():
    task = load_task("TruthfulQA")
    pairs = training_pairs(task, seed=0, per_record=2)
    assert len(pairs) == 2 * len(task.train)
    assert len({p for p, _ in pairs}) > 50
    assert all(p.startswith(task.initial_prompt) for p, _ in pairs)
    assert training_pairs(task, seed=0, per_record=2) == pairs

    def valid_share(with_cues: bool) -> float:
        cues = {p: find_cues(task, p) for p, _ in pairs}
        chosen = [t for p, t in pairs if not cues[p].novelty and not cues[p].examples
                  and (cues[p].tight_format and cues[p].hinted == set(task.fields)) == with_cues]
        records = [parse_record(t) for t in chosen]
        return sum(r is not None and not task.validate(r) for r in records) / len(chosen)

    # a prompt naming every field and asking for bare JSON, in any train phrasing (and not for
    # novelty), mostly gets valid records; the others rarely
    assert valid_share(True) > 0.75 > 0.3 > valid_share(False)


@needs_truthfulqa
def test_compacted_records_are_shorter_and_still_pass_schema_and_checks():
    task = load_task("TruthfulQA")
    first = task.train[0]  # its best answer is the third correct answer: the cut must keep it
    short = compact_record(task, first, max_words=5)
    assert short["best_answer"] in short["correct_answers"] and short["question"].endswith("?")
    assert len(json.dumps(short)) < len(json.dumps(first))
    for record in task.train:
        short = compact_record(task, record, max_words=5)
        assert not task.validate(short) and not task.failed_checks(short)
        assert len(json.dumps(short)) <= len(json.dumps(record)) and all(  # each answer starts an original one
            any(original.startswith(answer.rstrip("?")) for original in record["correct_answers"]) for answer in short["correct_answers"])
    compacted = [compact_record(task, r, max_words=5) for r in task.train]
    for (prompt, text), (same_prompt, _) in zip(training_pairs(task, seed=0, compact=5), training_pairs(task, seed=0)):
        # compaction changes the texts and the quoted example records, never the cues
        assert prompt == same_prompt or find_cues(task, prompt).examples
        record = parse_record(text)
        if record is not None:  # values are copied from compacted records
            assert all(any(value == r[key] for r in compacted) for key, value in record.items())
