"""The committed JSON-record MDLM behind the PromptEdit generator interface, and its benchmark."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from lmgym.envs.promptedit.metrics import parse_record
from lmgym.policies.record_generator import DEFAULT_CHECKPOINT, EVAL_PROMPTS_FILE, DiffusionRecordGenerator

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def generator():
    torch.set_num_threads(1)
    return DiffusionRecordGenerator(threads=1)


def test_generate_is_prompt_major_seeded_and_conditioned_on_the_prompt(generator):
    prompts = json.loads((DEFAULT_CHECKPOINT / EVAL_PROMPTS_FILE).read_text())["specified"]
    two = [prompts["MultiWOZ"], prompts["SuperNI"]]
    texts = generator.generate(two, n=4, seed=3)
    assert len(texts) == 8 and all(isinstance(t, str) for t in texts)
    assert texts == generator.generate(two, n=4, seed=3)
    assert texts != generator.generate(two, n=4, seed=4)
    assert len(set(texts[:4])) > 1  # the n samples of one prompt differ
    records = [parse_record(t) for t in texts]
    # the record type follows the prompt: MultiWOZ's "slots" for the first, SuperNI's "definition" for the second
    assert sum(r is not None and "slots" in r for r in records[:4]) >= 3
    assert sum(r is not None and "definition" in r for r in records[4:]) >= 3


def test_a_prompts_texts_do_not_depend_on_the_other_prompts_of_the_call(generator):
    prompts = json.loads((DEFAULT_CHECKPOINT / EVAL_PROMPTS_FILE).read_text())["specified"]
    alone = generator.generate([prompts["SuperNI"]], n=3, seed=7)
    # a longer prompt beside it used to change its left padding and its share of the noise
    assert generator.generate([prompts["MultiWOZ"], prompts["SuperNI"]], n=3, seed=7)[3:] == alone
    assert generator.generate([prompts["SuperNI"], prompts["TruthfulQA"]], n=3, seed=7)[:3] == alone


def test_diffusion_sampler_benchmark_quick():
    spec = importlib.util.spec_from_file_location("diffusion_sampler", REPO / "benchmarks" / "diffusion_sampler.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.run(quick=True)
    rows = {(r["setting"], r["sampler"]): r for r in results["rows"]}
    samplers = ("reference", "threshold", "threshold+cache", "threshold+dualcache", "threshold+dualcache+eos")
    assert set(rows) == {(s, n) for s in ("greedy", "sampling") for n in samplers}
    assert rows[("greedy", "reference")]["forward_passes"] == results["gen_length"]  # LLaDA: one token per pass
    assert rows[("greedy", "reference")]["agreement_with_reference"] == 1.0
    for setting in ("greedy", "sampling"):
        # threshold decoding needs at least one pass per block and at most one per token
        for name in samplers[1:4]:
            assert results["gen_length"] // results["block_length"] <= rows[(setting, name)]["forward_passes"] <= results["gen_length"]
        # stopping at EOS skips the blocks after every record has ended, and changes no record
        assert rows[(setting, "threshold+dualcache+eos")]["forward_passes"] <= rows[(setting, "threshold+dualcache")]["forward_passes"]
        assert rows[(setting, "threshold+dualcache+eos")]["json_valid"] == rows[(setting, "threshold+dualcache")]["json_valid"]
    assert 0.0 <= rows[("greedy", "threshold+cache")]["agreement_with_reference"] <= 1.0
    assert set(results["speedup"]) == {f"{s}/{n}" for s in ("greedy", "sampling") for n in samplers[1:]}
    assert "| greedy | reference |" in bench.to_markdown(results)
