"""The cue phrasings: one sentence each, the library's own first, the held-out ones never trained on;
the curriculum's records are coherent (every field from one record)."""

import pytest

from lmgym.data import data_root
from lmgym.envs.promptedit.edits import (
    FORMAT_SENTENCE,
    NOVELTY_SENTENCE,
    EditLibrary,
    example_sentence,
    field_hint,
    specified_prompt,
    split_sentences,
    variety_request,
)
from lmgym.envs.promptedit.generators import RuleBasedGenerator, compact_record, training_pairs
from lmgym.envs.promptedit.metrics import parse_record
from lmgym.envs.promptedit.phrasings import (
    CUE_KINDS,
    HELD_OUT_PHRASINGS,
    TRAIN_PHRASINGS,
    find_cues,
    phrase,
    quoted_records,
    specified_prompt_in,
)
from lmgym.envs.promptedit.tasks import load_task

TASKS = ("TruthfulQA", "SelfInstruct", "SuperNI", "MultiWOZ")
needs_data = pytest.mark.skipif(data_root() is None or not (data_root() / "truthfulqa").exists(),
                                reason="needs LMGYM_DATA")


@pytest.fixture(scope="module", params=TASKS)
def task(request):
    if data_root() is None:
        pytest.skip("needs LMGYM_DATA")
    return load_task(request.param)


def filled(kind, template, task):
    return phrase(template, task, task.fields[0], record=task.train[0])


@needs_data
def test_every_phrasing_is_one_sentence_and_the_sets_are_disjoint(task):
    for kind in CUE_KINDS:
        assert len(TRAIN_PHRASINGS[kind]) >= 4 and len(HELD_OUT_PHRASINGS[kind]) >= 2
        assert not set(TRAIN_PHRASINGS[kind]) & set(HELD_OUT_PHRASINGS[kind])
        for template in TRAIN_PHRASINGS[kind] + HELD_OUT_PHRASINGS[kind]:
            assert split_sentences(filled(kind, template, task)) == [filled(kind, template, task)]


@needs_data
def test_the_library_speaks_in_the_first_train_phrasing(task):
    field = task.fields[0]
    assert field_hint(task, field) == phrase(TRAIN_PHRASINGS["field_hint"][0], task, field)
    assert variety_request(field) == phrase(TRAIN_PHRASINGS["variety"][0], task, field)
    assert FORMAT_SENTENCE == TRAIN_PHRASINGS["format"][0] and NOVELTY_SENTENCE == TRAIN_PHRASINGS["novelty"][0]
    assert example_sentence(task.train[0]) == phrase(TRAIN_PHRASINGS["example"][0], record=task.train[0])
    assert specified_prompt_in(task, held_out=False) == specified_prompt(task)


@needs_data
def test_find_cues_reads_every_phrasing_back(task):
    for held_out in (False, True):
        for variant in range(4):
            prompt = specified_prompt_in(task, held_out, variant)
            cues = find_cues(task, prompt)
            assert cues.hinted == set(task.fields) and cues.tight_format and not cues.novelty and not cues.varied
    record = task.train[0]
    for template in TRAIN_PHRASINGS["variety"] + HELD_OUT_PHRASINGS["variety"]:
        assert find_cues(task, task.initial_prompt + " " + phrase(template, task, task.fields[-1])).varied == {task.fields[-1]}
    for template in TRAIN_PHRASINGS["example"] + HELD_OUT_PHRASINGS["example"]:
        assert find_cues(task, task.initial_prompt + " " + phrase(template, record=record)).examples == [record]
    for template in TRAIN_PHRASINGS["novelty"] + HELD_OUT_PHRASINGS["novelty"]:
        assert find_cues(task, task.initial_prompt + " " + template).novelty
    assert find_cues(task, task.initial_prompt) == find_cues(task, "")  # the bare prompt asks for nothing
    assert quoted_records('a {"x": 1} b {broken c {"y": {"z": 2}}') == [{"x": 1}, {"y": {"z": 2}}]


@needs_data
def test_no_training_prompt_holds_a_held_out_phrasing(task):
    pairs = training_pairs(task, seed=0, per_record=2, compact=5)
    held_out = {phrase(t, task, f) for kind in ("field_hint", "variety") for t in HELD_OUT_PHRASINGS[kind]
                for f in task.fields} | set(HELD_OUT_PHRASINGS["format"]) | set(HELD_OUT_PHRASINGS["novelty"])
    example_openings = {t.split("{")[0] for t in HELD_OUT_PHRASINGS["example"]}
    for prompt, _ in pairs:
        assert not any(sentence in prompt for sentence in held_out)
        assert not any(s.startswith(opening) for s in split_sentences(prompt) for opening in example_openings)
    # and every train phrasing of every cue kind does occur (the curriculum covers them)
    used = {(kind, t) for prompt, _ in pairs for kind in CUE_KINDS for t in TRAIN_PHRASINGS[kind]
            if (phrase(t, task, task.fields[0]) if kind in ("field_hint", "variety") else t.split("{")[0]) in prompt}
    assert used == {(kind, t) for kind in CUE_KINDS for t in TRAIN_PHRASINGS[kind]}


@needs_data
def test_training_records_are_coherent_one_source_record_each(task):
    """Every field of a curriculum record comes from the same (compacted) train record: a
    question with its own answers, a domain with its own slots."""
    compacted = [compact_record(task, r, 5) for r in task.train]
    pairs = training_pairs(task, seed=0, per_record=2, compact=5)
    records = [parse_record(text) for _, text in pairs]
    checked = 0
    for record in records:
        if record:
            assert any(all(source.get(k) == v for k, v in record.items()) for source in compacted), record
            checked += 1
    assert checked > len(pairs) // 2


@needs_data
def test_cues_in_held_out_phrasings_steer_the_rule_based_generator_like_train_ones(task):
    generator = RuleBasedGenerator(task)

    def schema_valid(prompt):
        texts = generator.generate([prompt], 64, seed=0)
        return sum(r is not None and not task.validate(r) for r in map(parse_record, texts)) / len(texts)

    # every field kept with probability 0.97 when hinted (0.86 for 5 fields), 0.6 when not, and
    # prose around 40% of the records of a prompt without the format cue
    start = schema_valid(task.initial_prompt)
    assert schema_valid(specified_prompt_in(task, held_out=False, variant=1)) > 0.7 > 0.4 > start
    assert schema_valid(specified_prompt_in(task, held_out=True, variant=1)) > 0.7


@needs_data
def test_variety_draws_whole_records_and_no_variety_repeats_the_favourites(task):
    generator = RuleBasedGenerator(task)
    plain = specified_prompt_in(task, held_out=False)
    varied = plain + " " + " ".join(phrase(TRAIN_PHRASINGS["variety"][2], task, f) for f in task.fields)
    distinct = lambda prompt: len(set(generator.generate([prompt], 64, seed=1)))  # noqa: E731
    assert distinct(plain) <= 2 * 2 ** len(task.fields)  # subsets of two favourite records
    assert distinct(varied) > distinct(plain)
    assert len(EditLibrary(task)) == 2 * len(task.fields) + 7
