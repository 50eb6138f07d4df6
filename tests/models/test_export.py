"""GGUF export: llama.cpp tokenizes as lmgym does and decodes the same greedy tokens as torch.

The model is the 0.9M-parameter ALFWorld ReAct model in zoo/ (weights stored in f16, so the
f16 file holds exactly the weights torch runs); llama.cpp reads the file through
llama-cpp-python (extra ``lmgym[openai-server]``).
"""

import importlib.util
import os

import pytest
import torch

from lmgym.errors import InputError
from lmgym.models.backends.hf import load_causal_lm
from lmgym.models.export import export_gguf, main, pretokenizer_name, write_gguf
from lmgym.models.generation import generate
from lmgym.models.tokenizer import chat_prompt_ids, prompt_ids, train_bpe_tokenizer

if importlib.util.find_spec("llama_cpp") is None and os.environ.get("CI"):
    raise RuntimeError("the GGUF export tests need llama-cpp-python under CI: pip install 'lmgym[openai-server]'")
llama_cpp = pytest.importorskip("llama_cpp")

TINY = "react/alfworld-ar"
PROMPTS = [
    "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, "
    "a drawer 2, and a sinkbasin 1.\nYour task is to: put a clean mug in coffeemachine.\n",
    "Your task is to: find two apple and put them in fridge.\nObservation: You arrive at countertop 2. "
    "On the countertop 2, you see a apple 3, a knife 1, and a tomato 2.\n",
    "Your task is to: heat some egg and put it in diningtable.\nObservation: Nothing happens.\n",
    "Your task is to: look at bowl under the desklamp.\nObservation: You open the drawer 1. It is empty.\n",
]
#: Text that stresses a byte-level pre-tokenizer: digits, runs of spaces, tabs, newlines,
#: contractions, punctuation, non-ASCII letters and emoji, a special token inside the text.
AWKWARD = ["it's 12345 o'clock,   said  Zoë\t\t(ok?)\n\n\nnext 3.14 — done 🙂", "  leading and trailing  ",
           "Action: go to drawer 10<|sep|>Thought:"]
NEW_TOKENS = 48


def llama(path, **kwargs):
    from lmgym.models.backends.llamacpp import avoid_amx_buffers

    avoid_amx_buffers()  # as the backend loads models
    return llama_cpp.Llama(model_path=str(path), n_ctx=512, n_batch=512, n_threads=1, verbose=False, **kwargs)


def torch_greedy(model, ids, eos_ids):
    out = generate(model, torch.tensor([ids]), max_new_tokens=NEW_TOKENS, eos_token_id=eos_ids)
    return out.tokens[0, :out.lengths[0]].tolist()


def llama_greedy(llm, ids, eos_ids):
    llm.reset()
    tokens = []
    for token in llm.generate(ids, temp=0.0, top_k=1, repeat_penalty=1.0):
        tokens.append(token)
        if token in eos_ids or len(tokens) == NEW_TOKENS:
            return tokens


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    model, tokenizer = load_causal_lm(TINY, device="cpu", dtype=torch.float32)
    return model, tokenizer


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    return export_gguf(TINY, tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def test_llama_cpp_tokenizes_prompts_to_lmgyms_ids(tiny, tiny_gguf):
    _, tokenizer = tiny
    llm = llama(tiny_gguf, vocab_only=True)
    for text in PROMPTS + AWKWARD:
        ids = prompt_ids(tokenizer, text, max_tokens=10_000)  # [BOS] text [SEP], as the tiny models read it
        rendered = tokenizer.decode(ids, skip_special_tokens=False)
        assert llm.tokenize(rendered.encode(), add_bos=False, special=True) == ids
        assert llm.detokenize(ids, special=True).decode() == rendered
    chat = [{"role": "user", "content": PROMPTS[0]}, {"role": "assistant", "content": "Action: look"},
            {"role": "user", "content": AWKWARD[0]}]
    ids = chat_prompt_ids(tokenizer, chat)
    assert llm.tokenize(tokenizer.decode(ids).encode(), add_bos=False, special=True) == ids
    assert llm.metadata["tokenizer.chat_template"] == tokenizer.chat_template
    llm.close()


def test_f16_gguf_decodes_the_same_greedy_tokens_as_torch(tiny, tiny_gguf):
    model, tokenizer = tiny
    eos = [tokenizer.eos_token_id]
    llm = llama(tiny_gguf)
    lengths = []
    for text in PROMPTS:
        ids = prompt_ids(tokenizer, text, max_tokens=10_000)
        expected = torch_greedy(model, ids, eos)
        assert llama_greedy(llm, ids, eos) == expected, tokenizer.decode(expected)
        lengths.append(len(expected))
    llm.close()
    assert sum(lengths) >= 3 * 16  # whole ReAct turns were compared, not a token or two


@pytest.fixture(scope="module")
def lora_checkpoint(tmp_path_factory, tiny):
    """A LoRA checkpoint over the tiny model whose B matrices are not zero (peft starts them at
    zero, which would make the adapter a no-op and the test vacuous); A and B drawn from a
    seeded generator (peft draws A from the global one)."""
    from lmgym.models import zoo
    from lmgym.models.checkpoints import save_checkpoint
    from lmgym.training.lora import add_lora

    base, tokenizer = load_causal_lm(TINY, device="cpu", dtype=torch.float32)
    model = add_lora(base, r=4, alpha=8)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.1)
    folder = tmp_path_factory.mktemp("lora") / "checkpoint"
    save_checkpoint(folder, model, tokenizer, {"kind": "ar", "base_model": str(zoo.path(TINY))})
    return folder


def test_lora_merged_and_as_a_llama_cpp_adapter_decode_as_peft_does(tmp_path, tiny, lora_checkpoint, tiny_gguf):
    base, tokenizer = tiny
    peft_model, _ = load_causal_lm(lora_checkpoint, device="cpu", dtype=torch.float32)
    merged = export_gguf(lora_checkpoint, tmp_path / "merged.gguf")
    adapter = export_gguf(lora_checkpoint, tmp_path / "adapter.gguf", lora="adapter")
    eos = [tokenizer.eos_token_id]
    merged_llm, adapted_llm = llama(merged), llama(tiny_gguf, lora_path=str(adapter))
    changed = 0
    for text in PROMPTS:
        ids = prompt_ids(tokenizer, text, max_tokens=10_000)
        expected = torch_greedy(peft_model, ids, eos)
        changed += expected != torch_greedy(base, ids, eos)
        assert llama_greedy(merged_llm, ids, eos) == expected
        assert llama_greedy(adapted_llm, ids, eos) == expected
    merged_llm.close()
    adapted_llm.close()
    assert changed >= 2  # the adapter changes what the model writes
    assert "lora_A" in "".join(name for name, _ in peft_model.named_parameters())  # export left it unmerged


def test_a_digit_splitting_tokenizer_and_smollm2s_round_trip(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    from lmgym.models.networks import smollm2_folder
    from lmgym.models.tokenizer import load_tokenizer

    digits = train_bpe_tokenizer(PROMPTS * 4, vocab_size=400, split_digits=True)
    for tokenizer, pre in ((digits, "smollm"), (load_tokenizer(smollm2_folder()), "gpt-2")):
        assert pretokenizer_name(__import__("json").loads(tokenizer.backend_tokenizer.to_str())["pre_tokenizer"]) == pre
        config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                             tie_word_embeddings=True)
        path = write_gguf(LlamaForCausalLM(config), tokenizer, tmp_path / f"{pre}.gguf")
        llm = llama(path, vocab_only=True)
        for text in PROMPTS + AWKWARD:
            ids = chat_prompt_ids(tokenizer, [{"role": "user", "content": text}])
            assert llm.tokenize(tokenizer.decode(ids).encode(), add_bos=False, special=True) == ids, text
        llm.close()


def test_what_llama_cpp_cannot_run_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(InputError, match="masked-diffusion"):
        export_gguf("react/alfworld-mdlm", tmp_path / "mdlm.gguf")
    with pytest.raises(InputError, match="dtype"):
        export_gguf(TINY, tmp_path / "x.gguf", dtype="q3")
    assert main(["no/such-model", str(tmp_path / "x.gguf")]) == 2
    assert "error: " in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_the_command_writes_a_file_and_times_it(tmp_path, capsys):
    assert main([TINY, str(tmp_path / "tiny.gguf"), "--dtype", "f32"]) == 0
    assert "wrote" in capsys.readouterr().out and (tmp_path / "tiny.gguf").stat().st_size > 3_000_000
