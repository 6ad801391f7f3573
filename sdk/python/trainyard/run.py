"""What a bring-your-own trainer sees of its run (docs/training.md)."""

import os
import sys

CHECKPOINT_DIR = "TRAINYARD_CHECKPOINT_DIR"
RUN_ID = "TRAINYARD_RUN_ID"


def checkpoint_dir(default="checkpoints"):
    """The run's checkpoint directory, created if missing.

    On a cluster the agent sets TRAINYARD_CHECKPOINT_DIR, syncs it to S3 and
    restores it before any restart, so a trainer that resumes from what it
    finds there survives the loss of its node. Outside a run it is
    ``default``.
    """
    d = os.environ.get(CHECKPOINT_DIR) or default
    os.makedirs(d, exist_ok=True)
    return d


def run_id():
    """The run's id, or None outside a run."""
    return os.environ.get(RUN_ID)


def report(step, file=None, **scalars):
    """Adds points at ``step`` to the run's curves (``run scalars``, TensorBoard).

    Each scalar is one ``TRAINYARD_SCALAR step=N tag=NAME value=X`` line on
    stdout, which the agent reads; tags may group with ``/`` (pass them as
    ``**{"eval/return": r}``).
    """
    step = int(step)
    if step < 0:
        raise ValueError("step must be >= 0, got %d" % step)
    out = file or sys.stdout
    for tag, value in scalars.items():
        if not tag or any(c.isspace() for c in tag):
            raise ValueError("tag %r: want a name without spaces" % tag)
        out.write("TRAINYARD_SCALAR step=%d tag=%s value=%r\n" % (step, tag, float(value)))
    out.flush()
