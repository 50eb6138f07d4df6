import pytest

from lmgym.data import DataNotFoundError, find_data

SPEC = dict(required=["json_2.1.1/valid_seen"], layout="alfworld/json_2.1.1/{train,valid_seen,valid_unseen}/...",
            source="https://github.com/alfworld/alfworld (scripts/alfworld-download)", env_var="ALFWORLD_DATA")


def test_missing_data_names_the_variables_layout_and_source(monkeypatch):
    monkeypatch.delenv("LMGYM_DATA", raising=False)
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(DataNotFoundError) as err:
        find_data("alfworld", **SPEC)
    message = str(err.value)
    for needle in ("LMGYM_DATA", "ALFWORLD_DATA", "json_2.1.1", "alfworld-download"):
        assert needle in message


def test_malformed_folder_says_what_is_missing(monkeypatch, tmp_path):
    (tmp_path / "alfworld").mkdir()
    monkeypatch.setenv("LMGYM_DATA", str(tmp_path))
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(DataNotFoundError, match="missing json_2.1.1/valid_seen"):
        find_data("alfworld", **SPEC)


def test_family_variable_wins_over_lmgym_data(monkeypatch, tmp_path):
    own = tmp_path / "mine"
    (own / "json_2.1.1" / "valid_seen").mkdir(parents=True)
    monkeypatch.setenv("ALFWORLD_DATA", str(own))
    monkeypatch.setenv("LMGYM_DATA", str(tmp_path / "elsewhere"))
    assert find_data("alfworld", **SPEC) == own


def test_a_script_without_its_data_stops_with_one_line(monkeypatch):
    from lmgym.data import exit_if_data_missing

    monkeypatch.delenv("LMGYM_DATA", raising=False)
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(SystemExit) as stop:
        with exit_if_data_missing():
            find_data("alfworld", **SPEC)
    message = stop.value.code
    assert isinstance(message, str) and "\n" not in message
    assert message.startswith("No alfworld data found: neither ALFWORLD_DATA nor LMGYM_DATA is set.")
    assert "set LMGYM_DATA to a folder holding alfworld/" in message
