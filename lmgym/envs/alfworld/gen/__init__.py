"""Procedural ALFWorld: solvable households in the official PDDL domain, generated from ALFRED's rooms.

* `scenes` - the room layouts, object/receptacle rules and PDDL files read from the alfworld wheel;
* `generator` - `generate_game(seed, GenKnobs(...))` -> a game.tw-pddl dict with its walkthrough;
* `check` - every game's checks: the expert wins, the native and official engines agree;
* `env` - `ALFWorldGenEnv`, registered as ``lmgym/ALFWorld-Gen-v0`` and ``-Unseen-v0``.

Importing this package imports none of them.
"""
