"""Progress beats for auto-resume's hang watch (docs/resume.md, "Hangs and
crashes"). No dependency; any program can do the same with a file write.

    from auto_resume_progress import beat, section

    for step in range(start, steps):
        train_one_step()
        beat(step + 1)                    # at most a file write; no network
        if (step + 1) % 100 == 0:
            with section("checkpoint", 600):
                save_checkpoint()         # may take up to 600 s: not a hang

srun --auto-resume=1 gives every task AUTO_RESUME_PROGRESS, a file of its
own on the node; without it (a plain run) these do nothing. A step run with
--auto-resume-hang-timeout=S is relaunched from its checkpoint when a task
that beat stops beating for S seconds (or for the section it announced).
Under torchrun, the workers of one node share their srun task's file.
"""

import contextlib
import os

_last_step = None


def _write(text):
    path = os.environ.get("AUTO_RESUME_PROGRESS")
    if not path:
        return
    # A new file renamed over the old one: a reader never sees half of it.
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        pass  # the progress folder is gone (the step is ending): no beat


def beat(step=None):
    """One beat; `step` (an integer >= 0) is the training step reached."""
    global _last_step
    if step is not None:
        _last_step = int(step)
    _write("" if _last_step is None else str(_last_step))


@contextlib.contextmanager
def section(name, seconds):
    """A stretch known to be slow (a checkpoint save): the next beat may be
    up to `seconds` away. `name`: letters, digits, '_', '.', '-'."""
    step = "" if _last_step is None else f"{_last_step} "
    _write(f"{step}{name}:{int(seconds)}")
    try:
        yield
    finally:
        beat()
