"""The committed JSON-record generators (diffusion and AR) and any model folder behind the PromptEdit generator
interface (the sampler study's quick run: tests/test_studies.py)."""

import json
import os

import pytest
import torch

from lmgym.models import zoo
from lmgym.envs.promptedit.metrics import parse_record
from lmgym.models.checkpoints import read_meta
from lmgym.components.record_generator import (
    AR_CHECKPOINT,
    DEFAULT_CHECKPOINT,
    EVAL_PROMPTS_FILE,
    AutoregressiveRecordGenerator,
    DiffusionRecordGenerator,
    RecordGenerator,
)


@pytest.fixture(scope="module")
def generator():
    torch.set_num_threads(1)
    return DiffusionRecordGenerator(threads=1)


def test_generate_is_prompt_major_seeded_and_conditioned_on_the_prompt(generator):
    prompts = json.loads((zoo.path(DEFAULT_CHECKPOINT) / EVAL_PROMPTS_FILE).read_text())["specified"]
    two = [prompts["MultiWOZ"], prompts["SuperNI"]]
    texts = generator.generate(two, n=4, seed=3)
    assert len(texts) == 8 and all(isinstance(t, str) for t in texts)
    assert texts == generator.generate(two, n=4, seed=3)
    assert texts != generator.generate(two, n=4, seed=4)
    # the n samples of one prompt are drawn, not copied (this generator often repeats a favourite
    # record for a cued prompt, docs/aod.md, so the check is over both prompts)
    assert len(set(texts[:4])) > 1 or len(set(texts[4:])) > 1
    records = [parse_record(t) for t in texts]
    # the record type follows the prompt: MultiWOZ's "slots" for the first, SuperNI's "definition" for the second
    assert sum(r is not None and "slots" in r for r in records[:4]) >= 3
    assert sum(r is not None and "definition" in r for r in records[4:]) >= 3


def test_a_prompts_texts_do_not_depend_on_the_other_prompts_of_the_call(generator):
    prompts = json.loads((zoo.path(DEFAULT_CHECKPOINT) / EVAL_PROMPTS_FILE).read_text())["specified"]
    alone = generator.generate([prompts["SuperNI"]], n=3, seed=7)
    # a longer prompt beside it used to change its left padding and its share of the noise
    assert generator.generate([prompts["MultiWOZ"], prompts["SuperNI"]], n=3, seed=7)[3:] == alone
    assert generator.generate([prompts["SuperNI"], prompts["TruthfulQA"]], n=3, seed=7)[:3] == alone


# -- any folder behind the same interface: diffusion, autoregressive, LLaDA's own code -------------
TINY_LLADA_LAYERS = dict(d_model=64, n_layers=2, n_heads=4, n_kv_heads=4, mlp_hidden_size=128, max_sequence_length=512)


@pytest.fixture(scope="module")
def tiny_llada_generator_folder(tmp_path_factory, tiny_mdlm_folder):
    """The tiny random LLaDA folder (published code and config, shrunk) with a tokenizer made
    here: LLaDA-8B's own tokenizer is not in shared/reference."""
    from tiny_models import LLADA_REFERENCE, save_tiny_llada

    from lmgym.models.tokenizer import load_tokenizer

    if not (LLADA_REFERENCE / "modeling_llada.py").exists():
        pytest.skip(f"LLaDA's published files are not at {LLADA_REFERENCE} (shared/reference)")
    torch.set_num_threads(1)
    tokenizer = load_tokenizer(tiny_mdlm_folder)
    vocab = len(tokenizer)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")  # transformers caches the code per folder name
    folder = tmp_path_factory.mktemp("llada_generator") / f"LLaDA-generator-tiny-{worker}"
    save_tiny_llada(folder, {**TINY_LLADA_LAYERS, "vocab_size": vocab, "embedding_size": vocab,
                             "mask_token_id": tokenizer.mask_token_id, "eos_token_id": tokenizer.eos_token_id,
                             "pad_token_id": tokenizer.pad_token_id}, tokenizer)
    return folder


def assert_seeded_and_prompt_major(generator):
    prompts = ["Task: find the key.", "Task: open the door."]
    texts = generator.generate(prompts, n=3, seed=5)
    assert len(texts) == 6 and all(isinstance(t, str) for t in texts)
    assert texts == generator.generate(prompts, n=3, seed=5)  # same seed, same texts
    assert texts != generator.generate(prompts, n=3, seed=6)
    assert generator.generate(prompts[1:], n=3, seed=5) == texts[3:]  # a prompt's texts ignore the others


def test_one_class_loads_diffusion_and_autoregressive_folders(tiny_mdlm_folder, tiny_ar_folder):
    diffusion = RecordGenerator(tiny_mdlm_folder, threads=1)
    autoregressive = RecordGenerator(tiny_ar_folder, threads=1)
    assert (diffusion.kind, autoregressive.kind) == ("mdlm", "ar")
    for generator in (diffusion, autoregressive, DiffusionRecordGenerator(tiny_mdlm_folder),
                      AutoregressiveRecordGenerator(tiny_ar_folder)):
        assert_seeded_and_prompt_major(generator)
    # trained on "Thought: the key is in room k": both write that, not noise
    assert sum("key" in t for t in autoregressive.generate(["Task: find the key.\nObservation: You are in room 3. You see a key.\n"], 4, 0)) >= 2
    with pytest.raises(ValueError, match="holds a causal LM, but DiffusionRecordGenerator needs a masked-diffusion one"):
        DiffusionRecordGenerator(tiny_ar_folder)
    with pytest.raises(ValueError, match="holds a masked-diffusion LM, but AutoregressiveRecordGenerator needs a causal one"):
        AutoregressiveRecordGenerator(tiny_mdlm_folder)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        RecordGenerator("/nonexistent/folder")


def test_a_llada_folder_with_its_own_code_loads_as_a_diffusion_generator(tiny_llada_generator_folder):
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        RecordGenerator(tiny_llada_generator_folder)
    generator = RecordGenerator(tiny_llada_generator_folder, trust_remote_code=True, max_new_tokens=16,
                                block_length=8, cache="none", threads=1)
    assert generator.kind == "mdlm" and type(generator.model).__name__ == "LLaDAModelLM"
    assert generator.mask_id == generator.model.config.mask_token_id
    assert_seeded_and_prompt_major(generator)
    assert type(DiffusionRecordGenerator(tiny_llada_generator_folder, trust_remote_code=True).model).__name__ == "LLaDAModelLM"


def test_aods_editor_runs_on_the_same_llada_folder(tiny_llada_generator_folder):
    from lmgym.agents.prompt_search.editor import LMEditor, edit_context

    editor = LMEditor(str(tiny_llada_generator_folder), max_new_tokens=8, trust_remote_code=True, cache="none",
                      block_length=8, threads=1)
    assert type(editor.backend.model).__name__ == "LLaDAModelLM"
    contexts = [edit_context("a task", "Write a record."), edit_context("a task", "Write.", feedback="2 of 4 records miss a field.")]
    edits = editor.write(contexts, seed=3)
    assert len(edits) == 2 and all(isinstance(e, str) and "\n" not in e for e in edits)
    assert editor.write(contexts, seed=3) == edits  # random weights write noise, but seeded noise


def test_the_committed_ar_comparison_loads_through_the_same_interface():
    generator = AutoregressiveRecordGenerator(threads=1)
    assert generator.kind == "ar" and read_meta(AR_CHECKPOINT)["parameters"] == read_meta(DEFAULT_CHECKPOINT)["parameters"]
    prompts = json.loads((zoo.path(AR_CHECKPOINT) / EVAL_PROMPTS_FILE).read_text())["specified"]
    texts = generator.generate([prompts["SuperNI"]], n=4, seed=0)
    assert len(texts) == 4 and texts == generator.generate([prompts["SuperNI"]], n=4, seed=0)
    assert sum(parse_record(t) is not None for t in texts) >= 2
