"""Prompt search at a budget: exact generator-call accounting, each method's defining rule, and
the agents in the benchmark runner (the rule-based stand-in generator keeps it to seconds)."""

import json

import numpy as np
import pytest

import lmgym  # noqa: F401  registers the ids
from lmgym.agents.prompt_search.base import BudgetSpent, PromptEvaluator, sentence_crossover
from lmgym.agents.prompt_search.editor import MAX_HISTORY, edit_context
from lmgym.agents.prompt_search.evoprompt import EvoPromptDE, EvoPromptGA, donor_difference, roulette
from lmgym.agents.prompt_search.gepa import GEPA, accepts, pareto_parents
from lmgym.agents.prompt_search.opro import OPRO
from lmgym.agents.prompt_search.promptbreeder import PromptBreeder
from lmgym.agents.prompt_search.simple import HillClimb, RandomEdits, StaticPrompt
from lmgym.agents.prompt_search.teacher import MUTATION_INSTRUCTIONS, teacher_edit
from lmgym.agents.runner import agent_seed
from lmgym.data import data_root
from lmgym.envs.promptedit.edits import FORMAT_SENTENCE, EditLibrary, field_hint, split_sentences
from lmgym.envs.promptedit.env import PromptEditEnv
from lmgym.envs.promptedit.generators import RuleBasedGenerator
from lmgym.envs.promptedit.tasks import load_task

pytestmark = pytest.mark.skipif(data_root() is None or not (data_root() / "super_natural_instructions").exists(),
                                reason="needs LMGYM_DATA/super_natural_instructions")
RULES = "lmgym.envs.promptedit.generators:RuleBasedGenerator"


class CountingGenerator(RuleBasedGenerator):
    """The rule-based stand-in, counting its calls: the ground truth of the accounting."""

    calls = 0

    def generate(self, prompts, n, seed):
        type(self).calls += len(prompts)
        return super().generate(prompts, n, seed)


class ScriptedEditor:
    """Appends a new numbered sentence each call; records what it was shown."""

    def __init__(self):
        self.contexts, self.count = [], 0

    def write(self, contexts, seed):
        self.contexts += list(contexts)
        edits = []
        for _ in contexts:
            self.count += 1
            edits.append(f"append: Rule number {self.count} applies.")
        return edits


@pytest.fixture()
def env():
    CountingGenerator.calls = 0
    return PromptEditEnv("SuperNI", generator=CountingGenerator, batch_size=4)


def run(agent, env, seed=0):
    agent.use_env(0, env)
    agent.reset(seed=agent_seed(seed))
    observation, info = env.reset(seed=seed)
    before = CountingGenerator.calls
    decision = agent.decide(observation, info)
    return decision, CountingGenerator.calls - before


def test_evaluator_counts_calls_caches_pairs_and_stops_at_the_budget(env):
    evaluator = PromptEvaluator(env, budget=2)
    start = env.task.initial_prompt
    first = evaluator.evaluate(start, 1)
    assert evaluator.evaluate(start, 1) is first and evaluator.calls == 1  # a judged pair is free
    evaluator.evaluate(start, 2)
    with pytest.raises(BudgetSpent):
        evaluator.evaluate(start, 3)
    assert evaluator.calls == 2 == CountingGenerator.calls
    assert [calls for calls, _ in evaluator.curve] == [1, 2]


@pytest.mark.parametrize("make", [
    lambda: RandomEdits(budget=7), lambda: HillClimb(budget=7),
    lambda: EvoPromptGA(budget=7, population=3, editor=ScriptedEditor()),
    lambda: EvoPromptDE(budget=7, population=3, editor=ScriptedEditor()),
    lambda: PromptBreeder(budget=7, units=3, editor=ScriptedEditor()),
    lambda: OPRO(budget=7, editor=ScriptedEditor()),
    lambda: GEPA(budget=7, pareto_seeds=2, feedback_seeds=3, editor=ScriptedEditor()),
])
def test_every_method_spends_exactly_what_it_reports_and_never_more_than_its_budget(env, make):
    agent = make()
    decision, generated = run(agent, env)
    assert decision.extra["generator_calls"] == generated <= 7
    if not isinstance(agent, HillClimb):  # the climber may stop at a local optimum
        assert generated == 7
    assert decision.action.startswith("replace prompt: ")
    assert decision.extra["curve"][-1][0] == generated


def test_a_search_whose_editor_only_writes_refused_edits_ends(env):
    class Refused(ScriptedEditor):
        def write(self, contexts, seed):
            super().write(contexts, seed)
            return ["not an edit"] * len(contexts)

    decision, generated = run(OPRO(budget=8, editor=Refused()), env)
    assert generated == 1 and decision.action == f"replace prompt: {env.task.initial_prompt}"


def test_static_spends_nothing_and_submits_the_starting_prompt(env):
    decision, generated = run(StaticPrompt(budget=64), env)
    assert generated == 0 and decision.action == f"replace prompt: {env.task.initial_prompt}"


def test_a_search_is_a_function_of_its_seed(env):
    first = run(OPRO(budget=5, editor=ScriptedEditor()), env, seed=3)[0]
    again = run(OPRO(budget=5, editor=ScriptedEditor()), env, seed=3)[0]
    assert first.action == again.action and first.extra["curve"] == again.extra["curve"]


def test_gepa_accepts_only_strict_minibatch_improvement():
    class E:
        def __init__(self, reward):
            self.reward = reward
    assert not accepts([E(0.2), E(0.3)], [E(0.3), E(0.2)])  # equal sums: rejected
    assert accepts([E(0.2), E(0.3)], [E(0.3), E(0.21)])
    assert not accepts([E(0.5)], [E(0.4)])


def test_gepa_parents_are_the_non_dominated_front_members_weighted_by_fronts():
    scores = {"a": [0.9, 0.1, 0.5], "b": [0.2, 0.8, 0.5], "c": [0.1, 0.1, 0.1], "d": [0.9, 0.1, 0.5]}
    counts = pareto_parents(scores)
    assert "c" not in counts  # on no front
    assert set(counts) in ({"a", "b"}, {"d", "b"})  # a and d tie everywhere: one dominates the other away
    assert counts["b"] == 2


class ScoredEnv:
    """A PromptEdit stand-in whose reward is a fixed function of the prompt (for acceptance rules)."""

    def __init__(self, reward):
        from types import SimpleNamespace

        self.task = load_task("SuperNI")
        self.library, self.num_samples, self.reward = EditLibrary(self.task), 1, reward
        self.verdict = lambda prompt: SimpleNamespace(reward=self.reward(prompt), feedback="2 of 4 records miss the field output.", metrics={})
        self.judged: list[tuple[str, int]] = []

    @property
    def unwrapped(self):
        return self

    def evaluate(self, prompt, seed):
        self.judged.append((prompt, seed))
        return self.verdict(prompt), ["{}"]


@pytest.mark.parametrize("improves", [False, True])
def test_gepa_pool_grows_only_by_children_that_strictly_beat_their_parent(improves):
    env = ScoredEnv((lambda p: len(p) / 1000) if improves else (lambda p: 0.5))
    agent = GEPA(budget=20, pareto_seeds=2, feedback_seeds=3, editor=ScriptedEditor())
    agent.use_env(0, env)
    agent.reset(seed=0)
    submitted, evaluator = agent.run_search(env.task.initial_prompt)
    pareto = {seed for prompt, seed in env.judged if prompt == env.task.initial_prompt}
    pareto_seeds = [seed for prompt, seed in env.judged[:2]]  # the start is judged on the Pareto seeds first
    grown = {prompt for prompt, seed in env.judged if seed in pareto_seeds} - {env.task.initial_prompt}
    assert pareto and all("Feedback:" in c for c in agent.editor.contexts)  # reflective: reads the judge
    if improves:  # every child is longer: strictly better on the minibatch, so judged on the Pareto seeds too
        assert grown and submitted != env.task.initial_prompt
    else:  # ties never enter the pool
        assert not grown and submitted == env.task.initial_prompt


def test_de_mutates_only_where_the_donors_differ(env):
    agent = EvoPromptDE(budget=5, population=3, editor=ScriptedEditor())
    agent.use_env(0, env)
    agent.reset(seed=0)
    base = env.task.initial_prompt
    b, c = f"{base} {FORMAT_SENTENCE}", f"{base} Keep it short."
    assert donor_difference(b, c) == [FORMAT_SENTENCE, "Keep it short."]
    assert agent.mutated_merge(base, b, b) == base and agent.editor.count == 0  # identical donors: no mutation
    merged = agent.mutated_merge(base, b, c)
    [shown] = agent.editor.contexts
    assert f"Prompt: {FORMAT_SENTENCE} Keep it short." in shown  # the editor sees only the differing sentences
    assert split_sentences(merged)[0] == split_sentences(base)[0] and "Rule number 1 applies." in merged


def test_opro_shows_at_most_20_past_prompts_sorted_ascending_best_last():
    history = [(k / 100, f"Prompt {k}.") for k in range(25)]
    context = edit_context("a task", "Prompt 24.", history=history[::-1])
    lines = [line for line in context.splitlines() if line.startswith("score ")]
    assert len(lines) == MAX_HISTORY == 20
    assert lines[0] == "score 0.050: Prompt 5." and lines[-1] == "score 0.240: Prompt 24."


def test_opro_reads_scores_and_evoprompt_reads_no_feedback(env):
    opro, ga = OPRO(budget=4, editor=ScriptedEditor()), EvoPromptGA(budget=5, population=3, editor=ScriptedEditor())
    run(opro, env)
    run(ga, env)
    assert all("Past prompts, worst to best:" in c and "Feedback:" not in c for c in opro.editor.contexts)
    assert ga.editor.contexts and all("Feedback:" not in c for c in ga.editor.contexts)


def test_promptbreeder_mutates_with_a_units_instruction(env):
    agent = PromptBreeder(budget=6, units=3, editor=ScriptedEditor())
    run(agent, env)
    assert all(any(f"Instruction: {i}" in c for i in MUTATION_INSTRUCTIONS) for c in agent.editor.contexts)


def test_roulette_and_crossover():
    rng = np.random.default_rng(0)
    picks = [roulette(np.array([0.0, 1.0, 0.0]), rng, 1)[0] for _ in range(20)]
    assert set(picks) == {1}
    assert len(set(roulette(np.zeros(4), rng, 2))) == 2  # all zero: uniform, distinct
    assert roulette(np.array([0.5]), rng, 2) == [0, 0]  # a population of one: both parents are it
    child = sentence_crossover("Task. A. B.", "Task. B. C.", np.random.default_rng(1))
    assert child.startswith("Task.") and "B." in child  # the shared sentence always survives


def test_teacher_addresses_the_first_problem_the_feedback_names():
    task = load_task("SuperNI")
    library = EditLibrary(task)
    prompt = task.initial_prompt
    field = task.fields[1]
    edit = teacher_edit(library, prompt, np.random.default_rng(0), feedback=f"3 of 8 records miss the field {field}.")
    assert edit == f"append: {field_hint(task, field)}"
    edit = teacher_edit(library, prompt, np.random.default_rng(0),
                        feedback="2 of 8 records are not a bare JSON object (text around the JSON, or broken JSON).")
    assert edit == f"append: {FORMAT_SENTENCE}"


def test_the_agents_run_in_a_benchmark_spec_with_exact_calls(tmp_path):
    from lmgym.benchmarks.runner import run_benchmark
    from lmgym.benchmarks.spec import BenchmarkSpec

    spec = BenchmarkSpec.from_dict({
        "id": "aod-tiny", "episodes": 2, "max_steps": 1,
        "envs": [{"id": "lmgym/PromptEdit-SuperNI-v0", "kwargs": {"generator": RULES, "batch_size": 4}}],
        "agents": ["static", {"name": "random", "kind": "random-edits", "kwargs": {"budget": 3}},
                   {"name": "hill-climb", "kwargs": {"budget": 3}}]})
    summary = run_benchmark(spec, tmp_path / "out", quiet=True, plots=False)
    assert all(c["episodes"] == 2 and c["errors"] == 0 for c in summary["cells"])
    rows = [json.loads(line) for line in (tmp_path / "out" / "transcripts.jsonl").read_text().splitlines()]
    calls = {r["key"]: json.loads(r["steps"][0]["agent_json"])["generator_calls"] for r in rows}
    assert {k.split("|")[1] for k, v in calls.items() if v == 0} == {"static"}
    assert all(v == 3 for k, v in calls.items() if "|random|" in k)


@pytest.mark.parametrize("folder", ["tiny_ar_folder", "tiny_mdlm_folder"])
def test_the_editor_runs_on_an_autoregressive_or_a_diffusion_folder(request, folder):
    from lmgym.agents.prompt_search.editor import LMEditor

    path = str(request.getfixturevalue(folder))
    contexts = [edit_context("a task", "Write a record."), edit_context("a task", "Write.", feedback="2 of 4 records miss the field output.")]
    first = LMEditor(path, max_new_tokens=8).write(contexts, seed=5)
    assert len(first) == 2 and all(isinstance(e, str) and "\n" not in e for e in first)
    assert LMEditor(path, max_new_tokens=8).write(contexts, seed=5) == first  # a function of its seed


@pytest.fixture(scope="module")
def tiny_policies(tmp_path_factory):
    """MaskablePPO policies after 8 steps on SuperNI with the stand-in generator, with and without feedback."""
    from lmgym.training.ppo import PPOConfig, train

    out = tmp_path_factory.mktemp("aod_policies")
    for variant, show in (("ppo", True), ("scalar", False)):
        train(PPOConfig(env_id="lmgym/PromptEdit-SuperNI-v0", steps=8, n_steps=8, batch_size=8, num_envs=1,
                        env_kwargs=json.dumps({"batch_size": 4, "show_feedback": show, "generator": RULES}),
                        max_tokens=64, action_tokens=8, out=str(out / f"{variant}-SuperNI"), checkpoint_every=0,
                        eval_episodes=0, quiet=True))
    return out


def test_aod_policies_spend_the_budget_and_only_aod_ppo_reads_the_feedback(env, tiny_policies, monkeypatch):
    from lmgym.agents.aod import AoDPolicy, AoDScalar
    from lmgym.agents.ppo_agent import PPOAgent

    seen = []
    original = PPOAgent.decide
    monkeypatch.setattr(PPOAgent, "decide", lambda self, observation, info: seen.append(observation) or original(self, observation, info))
    for agent_class, variant in ((AoDPolicy, "ppo"), (AoDScalar, "scalar")):
        seen.clear()
        agent = agent_class(budget=5, path=str(tiny_policies / f"{variant}-{{task}}" / "model.zip"))
        decision, generated = run(agent, env)
        assert generated == decision.extra["generator_calls"] == 5 and seen
        assert all(("Feedback:" in o) == (variant == "ppo") for o in seen)
        assert all("Prompt: " in o and "Samples:" in o for o in seen)


def test_aod_editor_reads_the_feedback_of_its_last_batch(env):
    from lmgym.agents.aod import AoDEditor

    agent = AoDEditor(budget=4, editor=ScriptedEditor())
    decision, generated = run(agent, env)
    assert generated == 4 and len(agent.editor.contexts) >= 3
    assert all("Feedback: " in c for c in agent.editor.contexts)


def test_aod_policy_paths_name_a_file_or_an_installed_policy():
    from lmgym.agents.aod import AoDPolicy, AoDScalar
    from lmgym.models import zoo

    installed = zoo.root() / "aod"

    assert AoDPolicy().path_template == str(installed / "ppo-{task}" / "model.zip")
    assert AoDScalar().path_template == str(installed / "scalar-{task}" / "model.zip")
    assert AoDPolicy(path="ppo-ar-{task}").path_template == str(installed / "ppo-ar-{task}" / "model.zip")
    assert AoDPolicy(path="runs/aod/ppo-{task}/model.zip").path_template == "runs/aod/ppo-{task}/model.zip"
