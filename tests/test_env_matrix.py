"""Every registered id through the same checks (lmgym.testing), with no per-env test code.

Ids whose data folder or optional module is missing are skipped with the reason; CI sets
LMGYM_DATA and installs every extra, so there nothing is skipped.
"""

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lmgym  # noqa: F401  registers the ids
from lmgym import testing
from lmgym.cli import resolve
from lmgym.errors import InputError
from lmgym.envs.registry import ENVS


def _params():
    for env_id, entry in sorted(ENVS.items()):
        reason = testing.unavailable_reason(entry)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        yield pytest.param(env_id, marks=marks, id=env_id.split("/", 1)[1])


ENV_IDS = list(_params())


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_check_env(env_id):
    testing.check_env_api(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_info_contract(env_id):
    env = gym.make(env_id)
    observation, info = env.reset(seed=0)
    assert isinstance(observation, str) and observation
    testing.check_info_contract(info)
    assert info["action_valid"] is True
    assert env.spec.max_episode_steps == ENVS[env_id].max_episode_steps


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_transcript(env_id):
    testing.check_determinism(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_transcript_across_processes_and_hash_seeds(env_id):
    testing.check_cross_process_determinism(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_different_seeds_different_tasks(env_id):
    testing.check_seeds_differ(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_junk_actions_never_raise(env_id):
    testing.check_junk_actions(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_generated_junk_never_raises(env_id):
    env = gym.make(env_id)
    env.reset(seed=0)

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.text(max_size=300))
    def step_with(action):
        observation, _, terminated, truncated, info = env.step(action)
        assert isinstance(observation, str)
        testing.check_info_contract(info)
        if terminated or truncated:
            env.reset(seed=0)

    step_with()
    env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pickle_round_trip(env_id):
    testing.check_pickle(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_vector_envs_step(env_id):
    testing.check_vector_envs(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_expert_wins_from_reset(env_id):
    env = gym.make(env_id)
    _, info = env.reset(seed=0)
    env.close()
    if "expert_action" not in info:
        pytest.skip(f"{env_id} provides no expert_action")
    rate = testing.expert_success(env_id, seeds=range(5))
    assert rate >= ENVS[env_id].expert_min_success, f"{env_id}: expert won {rate:.0%} of 5 seeded episodes"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_task_index_out_of_range_or_not_an_integer_is_a_value_error(env_id):
    testing.check_task_index(env_id)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_an_unknown_constructor_kwarg_is_one_line_naming_it(env_id):
    # A misspelled knob must not be swallowed (a **kwargs constructor would silently ignore it)
    # and, through the CLI's resolver, must read as one line naming the env and the knob.
    with pytest.raises(InputError) as error:
        resolve(env_id, gym.make, env_id, no_such_knob=1)
    message = str(error.value)
    assert message.startswith(f"{env_id}: ") and "no_such_knob" in message and "\n" not in message


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_before_reset_is_the_same_clear_error(env_id):
    testing.check_step_before_reset(env_id)
