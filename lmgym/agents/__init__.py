"""Things that act in an lmgym env: the contract, baselines and the research agents."""

from lmgym.agents.base import Agent, Decision, ExpertAgent, RandomAgent
from lmgym.agents.runner import run_episode

__all__ = ["Agent", "Decision", "ExpertAgent", "RandomAgent", "run_episode"]
