import pytest

from lmgym.data import DataNotFoundError


@pytest.fixture(scope="session")
def alfworld_games():
    """The sorted game files of the three splits (skips when the data is not here)."""
    from lmgym.envs.alfworld.games import game_paths

    try:
        return {split: game_paths(split) for split in ("train", "valid_seen", "valid_unseen")}
    except DataNotFoundError as error:
        pytest.skip(f"ALFWorld data missing (set LMGYM_DATA): {error}".splitlines()[0])
