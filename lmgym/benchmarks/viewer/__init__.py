"""The episode viewer: benchmark runs and rollout files as web pages (``lmgym view PATH``).

* `lmgym.benchmarks.viewer.store`: a run folder or a rollout file as rows, a summary and
  transcripts, followed as the files grow.
* `lmgym.benchmarks.viewer.pages`: the HTML pages, pure functions of a source.
* `lmgym.benchmarks.viewer.app`: the FastAPI app and the ``lmgym view`` command (extra ``web``).
"""
