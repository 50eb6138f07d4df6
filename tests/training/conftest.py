import contextlib

import pytest


@pytest.fixture
def interrupt_training(monkeypatch):
    """``with interrupt_training(step): train(...)``: the shared loop raises KeyboardInterrupt
    (what Ctrl-C raises) when its learning-rate schedule reaches `step`, which the block
    expects; the schedule is restored after, so the next run resumes."""
    from lmgym.training import loop

    @contextlib.contextmanager
    def interrupt(step: int):
        schedule = loop.learning_rate

        def interrupted(cfg, at):
            if at == step:
                raise KeyboardInterrupt
            return schedule(cfg, at)

        monkeypatch.setattr(loop, "learning_rate", interrupted)
        try:
            with pytest.raises(KeyboardInterrupt):
                yield
        finally:
            monkeypatch.setattr(loop, "learning_rate", schedule)

    return interrupt
