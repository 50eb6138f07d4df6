"""The four schema tasks load from the real files; the judge cluster on known batches."""

import json

import pytest

from lmgym.data import DataNotFoundError, data_root
from lmgym.envs.promptedit.judge import METRIC_KEYS, JudgeCluster, RuleRubricJudge, rubric_questions
from lmgym.envs.promptedit.tasks import DATA_FOLDERS, LOADERS, load_task

TASKS = sorted(LOADERS)


def _needs(task_name):
    root = data_root()
    if root is None or not (root / DATA_FOLDERS[task_name]).exists():
        pytest.skip(f"needs LMGYM_DATA/{DATA_FOLDERS[task_name]} (set LMGYM_DATA)")
    return load_task(task_name)


@pytest.mark.parametrize("name", TASKS)
def test_task_loads_real_references_that_pass_their_own_schema_and_checks(name):
    task = _needs(name)
    assert len(task.train) > 100 and len(task.held_out) > 40
    for record in task.train[:50] + task.held_out[:50]:
        assert task.validate(record) == [] and task.failed_checks(record) == []
    assert set(task.train[0]) == set(task.fields)
    assert load_task(name) is task  # parsed once per process


def test_reference_counts_match_the_source_files():
    counts = {name: len(_needs(name).train) + len(_needs(name).held_out) + _needs(name).dropped for name in TASKS}
    # 817 TruthfulQA questions; 175 Self-Instruct seed instances; 300 + 281 + 300 SNI instances
    assert counts["TruthfulQA"] == 817 and counts["SelfInstruct"] == 175 and counts["SuperNI"] == 881
    assert _needs("MultiWOZ").train[0]["domain"] in ("attraction", "hospital", "hotel", "restaurant", "taxi", "train")


def test_missing_data_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LMGYM_DATA", str(tmp_path))
    with pytest.raises(DataNotFoundError, match="LMGYM_DATA"):
        load_task("TruthfulQA")
    with pytest.raises(ValueError, match="unknown PromptEdit task"):
        load_task("Nope")


@pytest.mark.parametrize("name", TASKS)
def test_a_batch_of_reference_copies_has_tsr_one_overlap_one_novelty_zero(name):
    task = _needs(name)
    judge = JudgeCluster(task)
    copies = [json.dumps(r) for r in task.held_out[:8]]
    verdict = judge.evaluate(copies)
    assert set(METRIC_KEYS) <= set(verdict.metrics)
    assert verdict.metrics["tsr"] == 1.0
    assert verdict.metrics["field_overlap"] == 1.0
    assert verdict.metrics["novelty"] == 0.0
    assert verdict.metrics["similarity"] == pytest.approx(1.0, abs=1e-5)
    assert "8 of 8 records copy a reference record verbatim." in verdict.statements
    assert verdict.answers[rubric_questions(task)[-3][1]] is False  # the copies question
    assert not verdict.won


def test_duplicates_have_diversity_zero_and_are_reported_as_repeats():
    task = _needs("TruthfulQA")
    verdict = JudgeCluster(task).evaluate([json.dumps(task.train[0])] * 6)
    assert verdict.metrics["diversity"] == pytest.approx(0.0, abs=1e-6)
    assert any(s.startswith("The category repeats the same value") and "in 6 of 6 records" in s for s in verdict.statements)


def test_tsr_counts_parse_schema_and_semantic_failures():
    task = _needs("TruthfulQA")
    good = dict(task.train[0])
    missing = {k: v for k, v in good.items() if k != "correct_answers"}
    contradiction = {**good, "incorrect_answers": [good["best_answer"]]}
    batch = [json.dumps(good), "Sure! " + json.dumps(good), json.dumps(missing), json.dumps(contradiction)]
    verdict = JudgeCluster(task).evaluate(batch)
    assert verdict.metrics["tsr"] == 0.25
    assert verdict.metrics["parse_rate"] == 0.75
    assert "1 of 4 records are not a bare JSON object (text around the JSON, or broken JSON)." in verdict.statements
    assert "1 of 4 records miss the field correct_answers." in verdict.statements
    assert "1 of 2 schema-valid records fail the check answers_disjoint." in verdict.statements
    assert 0 < verdict.reward <= 0.25
    assert verdict.sub_rewards["tsr"] == 0.25 and set(verdict.sub_rewards) == {
        "tsr", "diversity", "novelty", "non_memorisation", "rubric"}


def test_multiwoz_checks_slot_names_and_db_values():
    task = _needs("MultiWOZ")
    assert task.failed_checks({"domain": "restaurant", "slots": {"food": "italian", "area": "centre"}}) == []
    assert task.failed_checks({"domain": "restaurant", "slots": {"stars": "4"}}) == ["slot_names"]
    assert task.failed_checks({"domain": "restaurant", "slots": {"food": "martian"}}) == ["values_in_db"]
    assert task.failed_checks({"domain": "train", "slots": {"leaveAt": "25:99"}}) == ["values_in_db"]
    assert task.failed_checks({"domain": "hotel", "slots": {"area": "dontcare", "people": "3"}}) == []


def test_rule_rubric_answers_every_question_and_reports_the_no_answers():
    task = _needs("SelfInstruct")
    judge = JudgeCluster(task, rubric_judge=RuleRubricJudge())
    verdict = judge.evaluate(["not json"] * 4)
    assert list(verdict.answers) == [q for _, q in rubric_questions(task)]
    assert verdict.reward == 0.0 and verdict.metrics["tsr"] == 0.0
    assert "Do at least 90% of the records parse as a JSON object?" in verdict.feedback
