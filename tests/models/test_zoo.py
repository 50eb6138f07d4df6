"""The model zoo: names resolve to folders, installs are atomic and recorded, verify catches drift,
and the committed zoo/ matches its manifest (`lmgym.models.zoo`, `lmgym zoo`)."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from lmgym import cli
from lmgym.errors import InputError
from lmgym.models import zoo

REPO_ZOO = Path(__file__).resolve().parents[2] / "zoo"


@pytest.fixture
def tmp_zoo(tmp_path, monkeypatch):
    """An empty zoo that LMGYM_ZOO points at."""
    monkeypatch.setenv("LMGYM_ZOO", str(tmp_path / "zoo"))
    return tmp_path / "zoo"


def write_model(folder: Path, weights: bytes = b"weights") -> None:
    (folder / "sub").mkdir()
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "sub" / "config.json").write_text('{"layers": 2}')


def installed(tmp_zoo, name="react/keydoor-ar", weights=b"weights"):
    return zoo.install(name, lambda folder: write_model(folder, weights), command="python train.py --install",
                       data="KeyDoor teacher episodes")


def test_root_is_lmgym_zoo_when_set_else_the_checkouts_zoo(tmp_zoo, monkeypatch):
    assert zoo.root() == tmp_zoo.resolve()
    monkeypatch.delenv("LMGYM_ZOO")
    assert zoo.root() == REPO_ZOO


def test_install_records_every_files_sha256_size_and_provenance(tmp_zoo):
    folder = installed(tmp_zoo)
    assert folder == tmp_zoo / "react/keydoor-ar" and zoo.names() == ["react/keydoor-ar"]
    entry = json.loads((tmp_zoo / "manifest.json").read_text())["react/keydoor-ar"]
    assert entry["files"] == {
        "model.safetensors": {"sha256": hashlib.sha256(b"weights").hexdigest(), "size": 7},
        "sub/config.json": {"sha256": hashlib.sha256(b'{"layers": 2}').hexdigest(), "size": 13},
    }
    assert entry["bytes"] == 20 and entry["command"] == "python train.py --install"
    assert entry["data"] == "KeyDoor teacher episodes"
    assert zoo.verify() == []


def test_a_failed_install_leaves_the_old_model_and_no_temporary_folder(tmp_zoo):
    installed(tmp_zoo, weights=b"old")
    manifest_before = (tmp_zoo / "manifest.json").read_text()

    def crash(folder):
        write_model(folder, b"half-written")
        raise RuntimeError("killed mid-install")

    with pytest.raises(RuntimeError):
        zoo.install("react/keydoor-ar", crash, command="c", data="d")
    assert (tmp_zoo / "react/keydoor-ar/model.safetensors").read_bytes() == b"old"
    assert sorted(p.name for p in (tmp_zoo / "react").iterdir()) == ["keydoor-ar"]
    assert (tmp_zoo / "manifest.json").read_text() == manifest_before
    installed(tmp_zoo, weights=b"new")  # a reinstall replaces the folder and its entry
    assert (tmp_zoo / "react/keydoor-ar/model.safetensors").read_bytes() == b"new" and zoo.verify() == []


def test_install_copies_a_folder_path(tmp_zoo, tmp_path):
    source = tmp_path / "run" / "checkpoint"
    source.mkdir(parents=True)
    write_model(source)
    folder = zoo.install("aod/copied", source, command="c", data="d")
    assert (folder / "sub/config.json").read_text() == '{"layers": 2}' and zoo.verify() == []


def test_resolve_takes_a_name_or_a_folder_path(tmp_zoo, tmp_path):
    folder = installed(tmp_zoo)
    assert zoo.resolve("react/keydoor-ar") == zoo.path("react/keydoor-ar") == folder
    elsewhere = tmp_path / "my-run"
    elsewhere.mkdir()
    assert zoo.resolve(elsewhere) == zoo.resolve(str(elsewhere)) == elsewhere
    assert zoo.is_installed("react/keydoor-ar") and not zoo.is_installed("react/other")


def test_a_missing_name_is_one_line_naming_lmgym_zoo_and_the_rebuild_command(tmp_zoo):
    installed(tmp_zoo)
    (tmp_zoo / "manifest.json").write_text(json.dumps(
        {"react/gone": {"files": {}, "bytes": 0, "command": "python examples/train_tiny_react.py --install",
                        "data": "d"}}))
    for name, rebuild, command in [("react/gone", None, "python examples/train_tiny_react.py --install"),
                                   ("react/never", "python examples/other.py --install", "python examples/other.py --install")]:
        with pytest.raises(InputError) as error:
            zoo.resolve(name) if rebuild is None else zoo.path(name, rebuild=rebuild)
        message = str(error.value)
        assert isinstance(error.value, zoo.ModelNotInstalled) and "\n" not in message
        assert name in message and "LMGYM_ZOO" in message and str(tmp_zoo) in message
        assert message.endswith(f"build it with: {command}")


@pytest.mark.parametrize("name", ["../outside", "/abs/path", "", "react/../../x"])
def test_a_name_outside_the_zoo_is_refused(tmp_zoo, name):
    with pytest.raises(InputError, match="not a zoo model name"):
        zoo.install(name, write_model, command="c", data="d")
    assert not (tmp_zoo.parent / "outside").exists()


def test_verify_catches_a_changed_missing_or_unlisted_file_and_a_missing_folder(tmp_zoo, capsys):
    folder = installed(tmp_zoo)
    installed(tmp_zoo, name="aod/other")
    (folder / "model.safetensors").write_bytes(b"weighty")  # same size, other bytes
    (folder / "sub" / "config.json").unlink()
    (folder / "stray.bin").write_bytes(b"x")
    (tmp_zoo / "aod" / "other" / "model.safetensors").rename(tmp_zoo / "loose.safetensors")
    problems = [
        "aod/other: model.safetensors is missing",
        "react/keydoor-ar: model.safetensors differs from the manifest (size or sha256)",
        "react/keydoor-ar: sub/config.json is missing",
        "loose.safetensors: not listed in manifest.json",
        "react/keydoor-ar/stray.bin: not listed in manifest.json",
    ]
    assert zoo.verify() == problems
    assert cli.main(["zoo", "--verify"]) == 1 and capsys.readouterr().out.splitlines() == problems
    shutil.rmtree(tmp_zoo / "aod" / "other")
    assert "aod/other: not installed" in "\n".join(zoo.verify())


def test_verify_without_a_manifest_says_so(tmp_zoo):
    assert zoo.verify() == [f"{tmp_zoo.resolve()}: no manifest.json (set LMGYM_ZOO to a zoo folder, such as a clone's zoo/)"]


def test_cli_lists_names_with_size_command_and_data_and_prints_the_root(tmp_zoo, capsys):
    installed(tmp_zoo)
    assert cli.main(["zoo"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "react/keydoor-ar  0.0 MB, 2 files",
        "    command: python train.py --install",
        "    data: KeyDoor teacher episodes",
    ]
    assert cli.main(["zoo", "--root"]) == 0 and capsys.readouterr().out == f"{tmp_zoo.resolve()}\n"
    assert cli.main(["zoo", "--verify"]) == 0 and "1 models" in capsys.readouterr().out


# -- the committed zoo -------------------------------------------------------------------------
def test_the_committed_zoo_matches_its_manifest():
    assert zoo.verify(REPO_ZOO) == []


def test_every_folder_under_zoo_is_a_manifest_name_and_every_name_a_folder():
    names = set(zoo.manifest(REPO_ZOO))
    assert names and all((REPO_ZOO / name).is_dir() for name in names)
    for folder in (p for p in REPO_ZOO.rglob("*") if p.is_dir()):
        rel = folder.relative_to(REPO_ZOO)
        inside = [name for name in names if rel == Path(name) or Path(name) in rel.parents]
        above = [name for name in names if rel in Path(name).parents]
        assert inside or above, f"zoo/{rel} belongs to no manifest entry"
        assert len(inside) <= 1, f"zoo/{rel} is inside two entries: {inside}"
    for name, entry in zoo.manifest(REPO_ZOO).items():
        assert entry["command"].strip() and entry["data"].strip(), f"{name} does not say how it was trained"
        assert entry["bytes"] == sum(f["size"] for f in entry["files"].values())


def test_no_committed_model_records_a_local_absolute_path():
    """A meta names its data and starts portably (`lmgym.models.checkpoints.portable_meta`): an
    absolute path of the machine that trained it means nothing in another checkout."""
    def strings(value):
        if isinstance(value, dict):
            yield from (s for v in value.values() for s in strings(v))
        elif isinstance(value, list):
            yield from (s for v in value for s in strings(v))
        elif isinstance(value, str):
            yield value

    metas = sorted(REPO_ZOO.glob("*/*/lmgym.json"))
    assert metas
    for meta in metas:
        local = [s for s in strings(json.loads(meta.read_text())) if s.startswith(("/work/", "/home/", "/tmp/", "/root/"))]
        assert not local, (meta.parent.name, local[:3])
