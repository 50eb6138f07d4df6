"""Things that act in an lmgym env: the contract, baselines and the research agents."""

from lmgym.agents.base import Agent, Decision, ExpertAgent, RandomAgent
from lmgym.agents.runner import agent_seed, run_episode, run_episodes

__all__ = ["Agent", "Decision", "ExpertAgent", "RandomAgent", "agent_seed", "run_episode", "run_episodes"]
