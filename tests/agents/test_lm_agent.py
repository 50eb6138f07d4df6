"""LMAgent: prompts, parsing, snapping, history, batching, and real tiny models behind it."""

import gymnasium as gym
import pytest

import lmgym  # noqa: F401
from lmgym.agents.lm import LMAgent, snap_action
from lmgym.agents.registry import make_agent
from lmgym.agents.runner import run_episode, run_episodes
from lmgym.models.backends import Completion, TextBackend
from lmgym.react import OMITTED


class Scripted(TextBackend):
    """Answers each prompt with the next scripted completion; records what it was asked."""

    name = "scripted"
    chat = True

    def __init__(self, answers, max_context=10_000):
        self.answers, self.asked, self.max_context = list(answers), [], max_context

    def complete(self, prompts, params=None, *, seeds=None, sessions=None):
        self.asked.append((prompts, list(sessions or [])))
        return [Completion(self.answers.pop(0) if self.answers else "Action: look", 10, 5, 0.0) for _ in prompts]

    def count_tokens(self, text):
        return len(text.split())


def test_actions_are_parsed_snapped_and_format_errors_counted():
    backend = Scripted(["Thought: the key is here.\nAction: Take Iron Key\nThought: more\nAction: go east",
                        "go north", "Thought: hmm.\nAction: tkae iron ky"])
    agent = LMAgent(backend=backend, few_shot=0)
    env = gym.make("lmgym/KeyDoor-v0")
    episode = run_episode(env, agent, seed=0, max_steps=3)
    first, second, third = episode.steps
    assert first.action == "take iron key" and first.action_valid  # case-insensitive snap
    assert first.completion == "Thought: the key is here.\nAction: Take Iron Key"  # the turn ends at its action
    assert '"format_error": false' in first.agent_json and '"snapped": true' in first.agent_json
    assert second.action == "go north" and '"format_error": true' in second.agent_json
    assert '"raw_action": "tkae iron ky"' in third.agent_json
    reason, act = first.spans
    assert first.completion[reason.start:reason.end] == "the key is here."
    assert first.completion[act.start:act.end] == "Take Iron Key"


def test_free_text_verbs_are_never_snapped():
    admissible = ["finish[no]", "finish[yes]", "search[Amber Voyage]"]
    assert snap_action("finish[noo]", admissible, free_form_verbs=("finish",), cutoff=80) == ("finish[noo]", False)
    assert snap_action("search[amber voyage]", admissible, free_form_verbs=("finish",), cutoff=80) == \
        ("search[Amber Voyage]", True)
    assert snap_action("completely different", admissible, free_form_verbs=(), cutoff=80)[1] is False


def test_the_prompt_holds_instructions_demonstrations_task_and_transcript():
    backend = Scripted(["Thought: go.\nAction: go east"] * 3)
    agent = LMAgent(backend=backend, few_shot=1)
    run_episode(gym.make("lmgym/KeyDoor-v0"), agent, seed=0, max_steps=3)
    messages = backend.asked[-1][0][0]
    system, first_user = messages[0]["content"], messages[1]["content"]
    assert "Commands: go north" in system and "Example 1:" in system and "Example 2:" not in system
    assert first_user.startswith("Task: Find the iron key") and "Admissible actions:" in first_user
    assert [m["role"] for m in messages[1:]] == ["user", "assistant"] * 2 + ["user"]


def test_demonstrations_as_turns_come_between_the_system_message_and_the_episode():
    backend = Scripted(["Thought: go.\nAction: go east"] * 3)
    agent = LMAgent(backend=backend, few_shot=2, demonstration_turns=True)
    run_episode(gym.make("lmgym/KeyDoor-v0"), agent, seed=0, max_steps=2)
    messages = backend.asked[-1][0][0]
    assert "Commands: go north" in messages[0]["content"] and "Example" not in messages[0]["content"]
    tasks = [m["content"] for m in messages if m["role"] == "user" and m["content"].startswith("Task: ")]
    assert len(tasks) == 3  # two demonstrations of training tasks, then the episode's own task
    demos = messages[1:messages.index({"role": "user", "content": tasks[2]})]
    assert demos and all(m["role"] == "assistant" for m in demos[1::2])
    assert all("Action: " in m["content"] for m in demos if m["role"] == "assistant")
    with pytest.raises(ValueError, match="react-paper"):
        LMAgent(backend=Scripted([]), demonstration_turns=True, demonstrations="react-paper")


def test_history_is_cut_from_the_left_keeping_the_task_and_newest_observation():
    backend = Scripted(["Thought: go.\nAction: look"] * 12)
    agent = LMAgent(backend=backend, few_shot=0, instructions=False, max_prompt_tokens=120, show_actions=False)
    run_episode(gym.make("lmgym/KeyDoor-v0"), agent, seed=0, max_steps=12)
    sizes = []
    for (prompts, _) in backend.asked:
        messages = prompts[0]
        sizes.append(sum(len(m["content"].split()) for m in messages))
        assert messages[0]["content"].startswith("Task: ")
    last = backend.asked[-1][0][0]
    assert OMITTED in last[0]["content"] and max(sizes) <= 120
    # the cut jumps ahead, so consecutive prompts mostly share their beginning (cache hits)
    firsts = [p[0][1]["content"] if len(p[0]) > 1 else "" for p, _ in backend.asked]
    assert len(set(firsts)) < len(firsts) - 3


def test_history_by_turns_keeps_the_last_k():
    backend = Scripted(["Thought: go.\nAction: look"] * 6)
    agent = LMAgent(backend=backend, few_shot=0, history="turns", history_turns=2)
    run_episode(gym.make("lmgym/KeyDoor-v0"), agent, seed=0, max_steps=6)
    assert sum(m["role"] == "user" for m in backend.asked[-1][0][0]) == 2


def test_lm_is_a_registered_agent(tiny_ar_folder):
    agent = make_agent("lm", model=str(tiny_ar_folder))
    assert isinstance(agent, LMAgent) and agent.backend.name == "hf"


def test_a_tiny_hf_model_plays_with_its_session_cache(tiny_ar_folder):
    agent = LMAgent(str(tiny_ar_folder), few_shot=0, instructions=False, max_prompt_tokens=100)
    episode = run_episode(gym.make("lmgym/KeyDoor-v0"), agent, seed=0, max_steps=4)
    assert episode.length == 4 and all(s.completion_tokens > 0 and s.prompt_tokens > 0 for s in episode.steps)
    cached = [__import__("json").loads(s.agent_json)["cached_tokens"] for s in episode.steps]
    assert cached[0] == 0 and all(c > 0 for c in cached[1:])


def test_batched_episodes_equal_episodes_played_one_by_one(tiny_ar_folder):
    seeds = [0, 1, 2, 3, 4]
    one = LMAgent(str(tiny_ar_folder), few_shot=0, instructions=False, max_prompt_tokens=100)
    alone = [run_episode(gym.make("lmgym/KeyDoor-v0"), one, seed=s, max_steps=4) for s in seeds]
    many = LMAgent(str(tiny_ar_folder), few_shot=0, instructions=False, max_prompt_tokens=100, batch_size=3)
    envs = [gym.make("lmgym/KeyDoor-v0") for _ in range(3)]
    batched = dict(run_episodes(envs, many, seeds, max_steps=4))
    assert sorted(batched) == list(range(5))
    for k, episode in enumerate(alone):
        assert [s.action for s in batched[k].steps] == [s.action for s in episode.steps]
        assert [s.completion for s in batched[k].steps] == [s.completion for s in episode.steps]


def test_a_diffusion_checkpoint_acts_through_the_same_agent(tiny_mdlm_folder):
    agent = LMAgent(str(tiny_mdlm_folder), few_shot=0, instructions=False, max_prompt_tokens=64, max_new_tokens=32)
    assert agent.backend.name == "diffusion"
    episode = run_episode(gym.make("lmgym/KeyDoor-v0"), agent, seed=0, max_steps=2)
    assert episode.length == 2 and all(s.completion_tokens > 0 for s in episode.steps)


def test_sampling_agents_are_a_function_of_the_seed(tiny_ar_folder):
    agent = LMAgent(str(tiny_ar_folder), few_shot=0, instructions=False, temperature=1.0, max_prompt_tokens=100)
    env = gym.make("lmgym/KeyDoor-v0")
    runs = [[s.completion for s in run_episode(env, agent, seed=s, max_steps=3).steps] for s in (5, 5, 6)]
    assert runs[0] == runs[1]


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(ValueError, match="history"):
        LMAgent(backend=Scripted([]), history="all")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        LMAgent("no/such/folder")


def test_the_benchmark_runner_batches_lm_agents_with_the_same_rows(tiny_ar_folder, tmp_path):
    from lmgym.benchmarks.runner import read_rows, run_benchmark
    from lmgym.benchmarks.spec import AgentSpec, BenchmarkSpec, EnvSpec

    def spec(batch_size):
        kwargs = {"model": str(tiny_ar_folder), "few_shot": 0, "instructions": False, "max_prompt_tokens": 100,
                  "batch_size": batch_size}
        return BenchmarkSpec("lm", (EnvSpec("lmgym/KeyDoor-v0"),), (AgentSpec("random"), AgentSpec("tiny", "lm", kwargs)),
                             episodes=4, max_steps=3)

    run_benchmark(spec(1), tmp_path / "one", quiet=True, plots=False)
    summary = run_benchmark(spec(3), tmp_path / "three", quiet=True, plots=False)
    drop = ("seconds",)
    rows = {b: sorted(({k: v for k, v in r.items() if k not in drop} for r in read_rows(tmp_path / b)),
                      key=lambda r: r["key"]) for b in ("one", "three")}
    assert rows["one"] == rows["three"] and len(rows["one"]) == 8
    tiny = [r for r in rows["three"] if r["agent"] == "tiny"]
    assert all(r["completion_tokens"] > 0 and r["error"] is None for r in tiny)
    assert {c["agent"] for c in summary["cells"]} == {"random", "tiny"}


def test_react_paper_demonstrations_follow_the_task_type():
    from lmgym.data import data_root

    if data_root() is None or not (data_root() / "alfworld" / "react_prompts").is_dir():
        pytest.skip("needs LMGYM_DATA/alfworld/react_prompts")
    backend = Scripted(["Thought: look.\nAction: look"] * 2)
    agent = LMAgent(backend=backend, few_shot=2, demonstrations="react-paper")
    env = gym.make("lmgym/ALFWorld-v0", split="valid_seen")
    _, info = env.reset(seed=0)
    run_episode(env, agent, seed=0, max_steps=2)
    system = backend.asked[0][0][0][0]["content"]
    assert system.count("Example ") == 2 and "Action: " in system and "put" in system
    with pytest.raises(ValueError, match="ALFWorld only"):
        run_episode(gym.make("lmgym/KeyDoor-v0"), agent, seed=0, max_steps=1)
