"""HotPotQA search: ReAct's Wikipedia env over real HotPotQA paragraphs, and its procedural twin.

Modules: `scoring` (the official EM/F1), `corpus` (paragraphs, questions, the real-data
loaders), `retrieval` (BM25 and the retriever protocol), `engine` (ReAct's search/lookup
semantics), `tools` (thread-safe tool calls), `expert`, `env` (`HotPotQAEnv`) and `gen`
(`HotPotQAGenEnv`, a generated encyclopedia).
"""
