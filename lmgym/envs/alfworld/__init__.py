"""ALFWorld: household tasks in text, on a native engine identical to the official one.

* `env` - `ALFWorldEnv`, registered as ``lmgym/ALFWorld-v0``;
* `games` - where the official ``game.tw-pddl`` files are, and the `Game` record;
* `pddl`, `engine` - the pure-Python engine (PDDL problems, state, text);
* `textworld_engine` - the official engine (optional extra ``lmgym[textworld]``);
* `expert` - the planner behind ``info["expert_action"]``;
* `differential` - the side-by-side check of the two engines.

Importing this package imports none of them (``gen/`` adds procedural games).
"""
