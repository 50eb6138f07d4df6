"""Errors that mean "what the user asked for cannot be used", shared by every layer.

The command line shows an `InputError` as one line (`lmgym.cli`); any other exception is a bug
and keeps its traceback.
"""


class InputError(Exception):
    """Something the user named cannot be used (an env id, its kwargs, an agent, a file)."""
