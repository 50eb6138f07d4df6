"""Prompt-search methods for PromptEdit at a budget of generator calls: one short loop per method
over the `base.PromptEvaluator` contract (docs/aod.md)."""
