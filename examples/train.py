#!/usr/bin/python3
"""A small but real PyTorch DDP training that checkpoints and resumes.

Run it under torchrun (one process per node is enough; see
train_auto_resume.sh): it reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT from torchrun's environment and trains a tiny MLP regression on
synthetic data with the gloo backend (CPU only).

Every rank draws its own batch from a generator seeded by (step, rank), so a
run that resumes from the checkpoint of step K sees exactly the batches that
an uninterrupted run would have seen from step K on.

Rank 0 writes the checkpoint (model, optimizer, step) to
CHECKPOINT_DIR/checkpoint.pt every --checkpoint-every steps and at the end,
atomically: into a temporary file in the same folder, flushed to disk, then
renamed over the old one, so a node that dies mid-write leaves the previous
checkpoint intact. At start every rank loads the checkpoint if there is one,
so CHECKPOINT_DIR must be a folder that all nodes share.

Every rank beats for auto-resume's hang watch after each step (and announces
each checkpoint save as a slow section): auto_resume_progress.py, beside this
file. SIGUSR1 prints every rank's Python stacks to stderr (faulthandler), as
srun --auto-resume-hang-signal=USR1 asks before a hung step is cancelled.
--hang-at-step makes one rank stop for good at a step, to try the hang watch.
--fault-dir lets a caller make a rank hang or crash at a time of its choosing
(bench/goodput.sh does), and --step-log keeps a wall-clock record of every
step (the training step against wall time).

What rank 0 prints (one line each, stdout, flushed at once):
  world size W, master ADDR:PORT[, attempt A][, nodes NODE_LIST]
  starting from step 0              (no checkpoint yet)
  resumed from step K               (a checkpoint of step K was loaded)
  step K loss X                     (every --checkpoint-every steps)
  training done at step N
"""

import argparse
import datetime
import faulthandler
import os
import signal
import sys
import time

from auto_resume_progress import beat, section


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got '{text}'")
    return value


def non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds >= 0, got '{text}'")
    return value


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Tiny DDP training (gloo, CPU) that checkpoints and "
                    "resumes; run it under torchrun.")
    parser.add_argument("--steps", type=positive_int, required=True,
                        help="total number of training steps (counting the "
                             "steps done before a resume)")
    parser.add_argument("--checkpoint-dir", required=True, metavar="DIR",
                        help="folder shared by all nodes for checkpoint.pt "
                             "(created if missing)")
    parser.add_argument("--checkpoint-every", type=positive_int, default=5,
                        metavar="K",
                        help="checkpoint and print the loss every K steps "
                             "(default 5)")
    parser.add_argument("--step-seconds", type=non_negative_float, default=0.0,
                        metavar="S",
                        help="sleep S seconds in every step, to make a run "
                             "last long enough to interrupt (default 0)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the model's initial weights and of "
                             "the data (default 0)")
    parser.add_argument("--hang-at-step", type=positive_int, metavar="N",
                        help="rank --hang-rank stops for good once step N is "
                             "done, before it says so (the others block in "
                             "the next all_reduce): a hung collective")
    parser.add_argument("--hang-rank", type=int, default=0, metavar="R",
                        help="the rank that hangs (default 0)")
    parser.add_argument("--hang-once", action="store_true",
                        help="hang only in the first run that reaches the "
                             "step (a file in --checkpoint-dir remembers)")
    parser.add_argument("--fault-dir", metavar="DIR",
                        help="after each step, every rank looks for "
                             "DIR/hang-RANK and DIR/crash-RANK (RANK: its "
                             "rank); it removes the one it finds, then stops "
                             "for good (as --hang-at-step) or exits with "
                             "status 1: a hang or a crash, when a caller "
                             "chooses")
    parser.add_argument("--step-log", metavar="PATH",
                        help="rank 0 appends a line per step to PATH: "
                             "'EPOCH PID step K', and 'EPOCH PID start K' "
                             "once it has loaded the checkpoint of step K "
                             "(0: none), 'EPOCH PID checkpoint K' once the "
                             "checkpoint of step K is on disk")
    parser.add_argument("--check-args", action="store_true",
                        help="check the arguments and exit, without torch "
                             "(train_auto_resume.sh does, before torchrun)")
    args = parser.parse_args(argv)
    if os.path.exists(args.checkpoint_dir) and not os.path.isdir(args.checkpoint_dir):
        parser.error(f"argument --checkpoint-dir: '{args.checkpoint_dir}' "
                     "exists and is not a folder")
    return args


def torchrun_env():
    """RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, or exit."""
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    missing = [name for name in names if not os.environ.get(name)]
    if missing:
        sys.exit(f"train.py: {', '.join(missing)} not set: run it under "
                 "torchrun (e.g. through examples/train_auto_resume.sh)")
    return {name: os.environ[name] for name in names}


CHECKPOINT_NAME = "checkpoint.pt"
INPUTS, HIDDEN, BATCH = 16, 64, 64


def make_model(torch):
    return torch.nn.Sequential(
        torch.nn.Linear(INPUTS, HIDDEN), torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, 1))


def batch(torch, seed, step, rank, teacher):
    """The batch of one rank at one step: the same in every run."""
    gen = torch.Generator().manual_seed(
        (seed * 1_000_003 + step) * 65_536 + rank)
    x = torch.randn(BATCH, INPUTS, generator=gen)
    y = torch.sin(x @ teacher) + 0.01 * torch.randn(BATCH, 1, generator=gen)
    return x, y


def save_checkpoint(torch, path, state):
    """Write state to path atomically: temporary file, fsync, rename."""
    folder = os.path.dirname(path)
    tmp = os.path.join(folder, f".{CHECKPOINT_NAME}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself
    finally:
        os.close(fd)


def main(argv):
    args = parse_args(argv)
    if args.check_args:
        return 0
    env = torchrun_env()
    rank, world_size = int(env["RANK"]), int(env["WORLD_SIZE"])
    faulthandler.register(signal.SIGUSR1, all_threads=True)

    def say(text):
        if rank == 0:
            print(text, flush=True)

    extra = ""
    if os.environ.get("AUTO_RESUME_ATTEMPT"):
        extra += f", attempt {os.environ['AUTO_RESUME_ATTEMPT']}"
    if os.environ.get("NODE_LIST"):
        extra += f", nodes {os.environ['NODE_LIST']}"
    say(f"world size {world_size}, master {env['MASTER_ADDR']}:{env['MASTER_PORT']}{extra}")

    import torch  # after the argument checks: importing it takes a while
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=10))
    try:
        torch.manual_seed(args.seed)
        model = make_model(torch)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        # The function to learn: y = sin(x . w), w fixed for every run.
        teacher = torch.randn(INPUTS, 1, generator=torch.Generator().manual_seed(12345))
        teacher /= INPUTS ** 0.5

        path = os.path.join(args.checkpoint_dir, CHECKPOINT_NAME)
        step = 0
        if os.path.exists(path):
            state = torch.load(path, map_location="cpu")
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            step = int(state["step"])
        # Every rank must start from the same checkpoint: a rank that saw
        # none, or another one, would silently train a different model.
        steps = [torch.tensor([step]) for _ in range(world_size)]
        dist.all_gather(steps, torch.tensor([step]))
        seen = sorted({int(s) for s in steps})
        if len(seen) != 1:
            raise RuntimeError(
                f"ranks loaded checkpoints of different steps {seen} from "
                f"{path}: is --checkpoint-dir a folder that all nodes share?")
        say(f"resumed from step {step}" if step else "starting from step 0")
        step_log = None
        if args.step_log and rank == 0:
            step_log = open(args.step_log, "a", buffering=1)  # a line at a time

        def log_step(what):
            if step_log:
                step_log.write(f"{time.time():.3f} {os.getpid()} {what} {step}\n")
        log_step("start")
        if rank == 0:
            os.makedirs(args.checkpoint_dir, exist_ok=True)

        ddp = DistributedDataParallel(model)
        loss_fn = torch.nn.MSELoss()

        def checkpoint():
            with section("checkpoint", 600):
                if rank == 0:
                    save_checkpoint(torch, path, {
                        "step": step, "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "world_size": world_size, "seed": args.seed})
                dist.barrier()  # nobody goes on (or ends) before it is on disk
            log_step("checkpoint")

        def hang_now():
            if args.hang_at_step != step or args.hang_rank != rank:
                return False
            marker = os.path.join(args.checkpoint_dir, f"hung-at-{step}")
            if args.hang_once and os.path.exists(marker):
                return False
            open(marker, "w").close()
            print(f"rank {rank} hangs at step {step}", file=sys.stderr, flush=True)
            return True

        def fault_now():
            """'hang' or 'crash' if the caller asked this rank for one."""
            if not args.fault_dir:
                return None
            for kind in ("hang", "crash"):
                marker = os.path.join(args.fault_dir, f"{kind}-{rank}")
                try:
                    os.unlink(marker)
                except FileNotFoundError:
                    continue
                print(f"rank {rank} {kind}s at step {step} ({marker})",
                      file=sys.stderr, flush=True)
                return kind
            return None

        if step >= args.steps:
            say(f"checkpoint of step {step} is already at --steps {args.steps}: "
                "nothing to train")
        while step < args.steps:
            x, y = batch(torch, args.seed, step, rank, teacher)
            optimizer.zero_grad()
            loss = loss_fn(ddp(x), y)
            loss.backward()  # DDP averages the gradients over all ranks
            optimizer.step()
            step += 1
            if args.step_seconds:
                time.sleep(args.step_seconds)
            fault = fault_now()
            if fault == "crash":
                os._exit(1)  # as a crash does: no clean-up, no goodbye to the others
            if hang_now() or fault == "hang":
                while True:
                    time.sleep(3600)
            log_step("step")
            beat(step)
            if step % args.checkpoint_every == 0 or step == args.steps:
                mean = loss.detach().clone()
                dist.all_reduce(mean)
                say(f"step {step} loss {mean.item() / world_size:.6f}")
                checkpoint()
        say(f"training done at step {step}")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
