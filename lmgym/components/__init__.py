"""Torch halves of environments: what an env names by ``"module:attr"`` so `lmgym.envs` stays torch-free.

* `lmgym.components.record_generator`: the frozen JSON-record MDLM of PromptEdit-JSON.
* `lmgym.components.lm_judge`: the LM judge of PromptEdit-JSON.
* `lmgym.components.embeddings`: all-MiniLM-L6-v2 sentence embeddings (PromptEdit diversity).
* `lmgym.components.retrievers`: the dense retriever of HotPotQA search.
* `lmgym.components.sb3`: the stable-baselines3 feature extractor for token-id observations.
"""
