"""lmgym.react, the ReAct contract: a turn written and read back, a transcript rendered and cut
to its budget, and every family's prompt found through the registry."""

from lmgym.envs.registry import ENVS, FAMILY_PROMPTS, family_of, family_prompt
from lmgym.react import (DEFAULT_PROMPT, MESSAGE_OVERHEAD, OMITTED, Demonstration, ReActPrompt, Turn, advance_window,
                         format_completion, messages_as_text, parse_completion, render_messages, system_text,
                         transcript_budget)


def test_a_formatted_turn_parses_back_with_the_same_spans():
    text, spans = format_completion("the key is north", "go north")
    parsed = parse_completion(text)
    assert (parsed.reasoning, parsed.action, parsed.has_action) == ("the key is north", "go north", True)
    assert [(s.kind, s.start, s.end) for s in parsed.spans] == [(s.kind, s.start, s.end) for s in spans]


def test_the_turn_ends_at_its_action_line_and_a_bare_command_is_a_format_error():
    parsed = parse_completion("thought: look around\nACTION: > go to desk 1\nObservation: you dream")
    assert (parsed.reasoning, parsed.action) == ("look around", "go to desk 1")
    assert parsed.turn_end == len("thought: look around\nACTION: > go to desk 1")
    bare = parse_completion("I should go.\n  take iron key  \n")
    assert not bare.has_action and bare.action == "take iron key" and bare.reasoning == "I should go."


def test_a_cut_transcript_keeps_the_task_and_says_what_was_omitted():
    turns = [Turn("a room", "Action: look"), Turn("a hall", "Action: go east"), Turn("a vault")]
    demo = Demonstration("open the box", (Turn("a box", "Action: open box"),))
    messages = render_messages("rules", "find the key", turns, first_kept=1, demonstrations=[demo])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == "Task: open the box\nObservation: a box\n"  # the demonstration's turns
    assert messages[3]["content"] == f"Task: find the key\n{OMITTED}Observation: a hall\n"
    assert messages[5]["content"] == "Observation: a vault\n"


def test_demonstrations_in_the_system_message_are_numbered_text():
    demo = Demonstration("open the box", (Turn("a box", "Action: open box"),))
    system = system_text(DEFAULT_PROMPT, instructions=True, demonstrations=[demo, demo])
    assert system.startswith(DEFAULT_PROMPT.instructions.strip())
    assert f"Example 2:\n{demo.text()}" in system and demo.text() == messages_as_text(demo.messages())
    assert system_text(DEFAULT_PROMPT, instructions=False) == ""


def test_the_window_moves_only_on_overflow_and_then_to_three_quarters_of_the_budget():
    assert advance_window([10, 10, 10], 0, budget=30) == 0
    assert advance_window([10, 10, 10, 10], 0, budget=30) == 2  # 20 <= 22.5
    assert advance_window([10, 10, 10, 100], 1, budget=30) == 3  # the newest turn stays, alone
    count = lambda text: len(text.split())  # noqa: E731
    demo = Demonstration("t", (Turn("o", "Action: a"),))
    assert transcript_budget(count, "s s\n", "x", 100) == 100 - 2 - 1 - 2 * MESSAGE_OVERHEAD
    shown = count(messages_as_text(demo.messages()))
    assert transcript_budget(count, "s s\n", "x", 100, [demo]) == 100 - (2 + shown) - 1 - 4 * MESSAGE_OVERHEAD


def test_every_family_keeps_its_prompt_and_others_get_the_default():
    for family in FAMILY_PROMPTS:
        prompt = family_prompt(family)
        assert isinstance(prompt, ReActPrompt) and prompt.family == family and "Action:" in prompt.instructions
        assert prompt.demonstrations is not None and prompt.demonstrations.env in ENVS
    assert family_prompt(family_of("lmgym/Arith-v0")) is DEFAULT_PROMPT



def test_evaluation_splits_are_values_of_the_envs_split_argument():
    import inspect

    from lmgym.entrypoints import load_entry_point

    with_splits = {env_id: entry.eval_splits for env_id, entry in ENVS.items() if entry.eval_splits}
    hotpotqa = dict.fromkeys(("lmgym/HotPotQA-v0", "lmgym/HotPotQA-AllPages-v0", "lmgym/HotPotQA-Distractor-v0"),
                             ("dev", "test"))  # the two files of HotPotQA dev lmgym splits (docs/panels.md)
    assert with_splits == {"lmgym/WebShop-v0": ("test",), "lmgym/ALFWorld-v0": ("valid_seen", "valid_unseen"), **hotpotqa}
    for env_id in with_splits:
        assert "split" in inspect.signature(load_entry_point(ENVS[env_id].entry_point)).parameters
