"""Trainyard's Python client.

- ``trainyard.envs.make(env_id, num_envs)``: an env plugin as a vectorised
  env, stepped by an env server (the agent's, or ``trainyard env serve``).
- ``trainyard.checkpoint_dir()``: where a trainer keeps what it resumes from.
- ``trainyard.report(step, **scalars)``: points on the run's curves.
- ``trainyard.selfplay.serve(evaluate)``: your model as the evaluator of the
  self-play engine's search (batches of positions in, logits and values out).

Pure Python plus numpy; it runs from the source tree (``PYTHONPATH=sdk/python``)
or after ``pip install ./sdk/python``.
"""

from .run import checkpoint_dir, report, run_id  # noqa: F401
from . import envs, selfplay  # noqa: F401

__all__ = ["envs", "selfplay", "checkpoint_dir", "report", "run_id"]
