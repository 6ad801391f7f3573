"""An AlphaZero-style network for k-in-a-row games, as the self-play engine's
evaluator and as the trainer of the next candidate, in one file.

    # serve the model in MODEL_DIR (or a fresh one) to the engine's search
    python3 kinrow_az.py serve --model-dir MODEL_DIR [--socket PATH]

    # train on a window of NPZ exports, from the best model, into OUT_DIR
    python3 kinrow_az.py train --data gen-000003/selfplay.npz ... --init BEST_DIR --out OUT_DIR

In a self-play loop's ``model:`` section (docs/selfplay.md) the two commands
are just ``kinrow_az.py serve`` and ``kinrow_az.py train``: every flag
defaults to the variable the platform sets (TRAINYARD_MODEL_DIR,
TRAINYARD_EVAL_SOCKET, TRAINYARD_OBS_SHAPE, TRAINYARD_DATASETS,
TRAINYARD_BEST_MODEL_DIR, TRAINYARD_OUTPUT_DIR, TRAINYARD_NUM_PLAYERS,
TRAINYARD_SEED).

The network: the observation (players + 1 planes of the board's cells: own
stones, each opponent in turn order, empty cells) as image planes when the
board is square (a residual tower of 3x3 convolutions), else as one vector
(a residual tower of linear layers); a policy head over the cells and a
value head (tanh) for the player to move. In a two-player game the other
seat's value is its negation; with more players the others share what the
mover does not have (-v / (players - 1)).

Training: policy cross-entropy plus value MSE, AdamW with a one-cycle
learning rate, for --epochs passes over the window (the loop's
train_epochs); on a square board each position is shown under one of its 8
rotations and reflections, drawn at random, which multiplies what a few
hundred games teach.

A model directory holds ``config.json`` (the shape) and ``model.pt`` (the
weights); the trainer writes a new one, which the platform stores in S3 like
a checkpoint. It runs on CUDA when the process has a GPU, else on CPU.
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import trainyard.selfplay  # noqa: E402


class Block(nn.Module):
    def __init__(self, conv, width):
        super().__init__()
        if conv:
            self.a = nn.Conv2d(width, width, 3, padding=1, bias=False)
            self.b = nn.Conv2d(width, width, 3, padding=1, bias=False)
            self.na, self.nb = nn.BatchNorm2d(width), nn.BatchNorm2d(width)
        else:
            self.a, self.b = nn.Linear(width, width, bias=False), nn.Linear(width, width, bias=False)
            self.na, self.nb = nn.BatchNorm1d(width), nn.BatchNorm1d(width)

    def forward(self, x):
        y = F.relu(self.na(self.a(x)))
        return F.relu(x + self.nb(self.b(y)))


class Net(nn.Module):
    """Residual tower, policy head over the cells, value head for the mover."""

    def __init__(self, planes, cells, players, width=32, blocks=3):
        super().__init__()
        self.planes, self.cells, self.players = planes, cells, players
        side = int(round(math.sqrt(cells)))
        self.side = side if side * side == cells else 0
        if self.side:
            self.stem = nn.Sequential(nn.Conv2d(planes, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
            self.policy = nn.Conv2d(width, 1, 1)
            self.value = nn.Sequential(nn.Flatten(), nn.Linear(width * cells, 64), nn.ReLU(), nn.Linear(64, 1))
        else:
            self.stem = nn.Sequential(nn.Linear(planes * cells, width, bias=False), nn.BatchNorm1d(width), nn.ReLU())
            self.policy = nn.Linear(width, cells)
            self.value = nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, 1))
        self.tower = nn.Sequential(*[Block(bool(self.side), width) for _ in range(blocks)])

    def forward(self, obs):
        n = obs.shape[0]
        x = obs.view(n, self.planes, self.side, self.side) if self.side else obs.view(n, -1)
        h = self.tower(self.stem(x))
        logits = self.policy(h).view(n, self.cells)
        v = torch.tanh(self.value(h)).view(n)
        return logits, v


def device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load(model_dir, planes=None, cells=None, players=None):
    """The model in model_dir, or a fresh one of the given shape."""
    if model_dir and os.path.exists(os.path.join(model_dir, "config.json")):
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        net = Net(**cfg)
        net.load_state_dict(torch.load(os.path.join(model_dir, "model.pt"), map_location="cpu"))
        return net, cfg
    cfg = {"planes": planes, "cells": cells, "players": players}
    torch.manual_seed(0)
    return Net(**cfg), cfg


def save(net, cfg, out):
    os.makedirs(out, exist_ok=True)
    torch.save(net.state_dict(), os.path.join(out, "model.pt"))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f)


def seat_values(v, players):
    """The mover's value v [n] as one value per seat [n, players]."""
    out = np.empty((len(v), players), dtype=np.float32)
    out[:, 0] = v
    out[:, 1:] = (-v / max(players - 1, 1))[:, None]
    return out


def serve(a):
    net, cfg = load(a.model_dir, a.planes, a.cells, a.players)
    dev = device()
    net = net.to(dev).eval()

    @torch.no_grad()
    def evaluate(obs):
        logits, v = net(torch.from_numpy(np.ascontiguousarray(obs)).to(dev))
        return logits.float().cpu().numpy(), seat_values(v.float().cpu().numpy(), cfg["players"])

    name = a.name or os.path.basename(os.path.normpath(a.model_dir or "fresh"))
    trainyard.selfplay.serve(evaluate, socket_path=a.socket, model=name, ready=lambda: print("ready", flush=True))


def symmetries(side):
    """The 8 rotations and reflections of a square board as cell
    permutations [8, cells]: after symmetry k, cell c holds what cell
    perm[k][c] held (row 0 is the identity)."""
    idx = np.arange(side * side).reshape(side, side)
    out = []
    for flip in (False, True):
        b = idx.T if flip else idx
        for r in range(4):
            out.append(np.rot90(b, r).reshape(-1))
    return np.stack(out)


def augment(x, p, planes, perm):
    """Shows each sample of a batch under its symmetry: states x [n,
    planes*cells] and policies p [n, cells] permuted alike by perm [n, cells]."""
    n = len(x)
    x = torch.gather(x.view(n, planes, -1), 2, perm[:, None, :].expand(-1, planes, -1)).view(n, -1)
    return x, torch.gather(p, 1, perm)


def train(a):
    states, policy, value = [], [], []
    for path in a.data:
        z = np.load(path)
        s = z["states"]
        states.append(s.reshape(len(s), -1))
        policy.append(z["policy"])
        value.append(z["value"])
    states, policy, value = np.concatenate(states), np.concatenate(policy), np.concatenate(value)
    shape = np.load(a.data[0])["states"].shape
    net, cfg = load(a.init, shape[1], shape[2], a.players)
    dev = device()
    net = net.to(dev).train()
    opt = torch.optim.AdamW(net.parameters(), lr=a.lr, weight_decay=1e-4)
    x, p, v = (torch.from_numpy(t).to(dev) for t in (states, policy, value))
    rng = np.random.default_rng(a.seed)
    # A square board looks the same rotated or mirrored: each sample is
    # shown under one of its 8 symmetries, 8x the data for free.
    perms = torch.from_numpy(symmetries(net.side)).to(dev) if net.side and a.augment else None
    n = len(x)
    steps = a.steps or max(1, math.ceil(a.epochs * n / a.batch))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=steps)
    start = time.time()
    for step in range(steps):
        idx = torch.from_numpy(rng.integers(0, n, size=min(a.batch, n))).to(dev)
        xb, pb = x[idx], p[idx]
        if perms is not None:
            xb, pb = augment(xb, pb, cfg["planes"], perms[torch.from_numpy(rng.integers(0, 8, size=len(idx))).to(dev)])
        logits, pv = net(xb)
        loss_p = -(pb * F.log_softmax(logits, dim=1)).sum(1).mean()
        loss_v = F.mse_loss(pv, v[idx])
        loss = loss_p + loss_v
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % max(steps // 5, 1) == 0 or step == steps - 1:
            print("step %d policy_loss %.4f value_loss %.4f" % (step, loss_p.item(), loss_v.item()), flush=True)
    save(net.cpu(), cfg, a.out)
    print("trained %d steps on %d positions in %.1fs on %s; wrote %s" % (steps, n, time.time() - start, dev, a.out), flush=True)


def env(name, default=None, kind=str):
    v = os.environ.get(name, "")
    return kind(v) if v else default


def main():
    shape = [int(d) for d in env("TRAINYARD_OBS_SHAPE", "3,64").split(",")]
    planes, cells = (shape[0], int(np.prod(shape[1:]))) if len(shape) > 1 else (1, shape[0])
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="serve the model to the engine's search")
    s.add_argument("--model-dir", default=env("TRAINYARD_MODEL_DIR"), help="a model directory (default: $TRAINYARD_MODEL_DIR); without one, a fresh network")
    s.add_argument("--socket", help="default: $TRAINYARD_EVAL_SOCKET")
    s.add_argument("--name", default=env("TRAINYARD_MODEL_NAME"), help="the model's name in games (default: $TRAINYARD_MODEL_NAME, else the directory's)")
    s.add_argument("--planes", type=int, default=planes, help="fresh network: players + 1 (default: from $TRAINYARD_OBS_SHAPE)")
    s.add_argument("--cells", type=int, default=cells, help="fresh network: board cells (default: from $TRAINYARD_OBS_SHAPE)")
    s.add_argument("--players", type=int, default=env("TRAINYARD_NUM_PLAYERS", 2, int))
    t = sub.add_parser("train", help="train the next candidate on NPZ exports")
    data = env("TRAINYARD_DATASETS")
    t.add_argument("--data", nargs="+", required=not data, default=data.split(":") if data else None,
                   help="selfplay.npz files of the training window (default: $TRAINYARD_DATASETS, colon-separated)")
    t.add_argument("--init", default=env("TRAINYARD_BEST_MODEL_DIR"), help="the best model's directory (default: $TRAINYARD_BEST_MODEL_DIR, else a fresh network)")
    out = env("TRAINYARD_OUTPUT_DIR")
    t.add_argument("--out", required=not out, default=out, help="the new model's directory (default: $TRAINYARD_OUTPUT_DIR)")
    t.add_argument("--players", type=int, default=env("TRAINYARD_NUM_PLAYERS", 2, int))
    t.add_argument("--epochs", type=float, default=env("TRAINYARD_EPOCHS", 4, float), help="passes over the window, each position under one symmetry a pass (default: $TRAINYARD_EPOCHS, else 4)")
    t.add_argument("--steps", type=int, default=0, help="batches to train on (default: from --epochs)")
    t.add_argument("--batch", type=int, default=256)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--no-augment", dest="augment", action="store_false", help="do not show square boards rotated and mirrored")
    t.add_argument("--seed", type=int, default=env("TRAINYARD_SEED", 0, int) % (2**32))
    a = p.parse_args()
    # The evaluator shares its node with the search's goroutines: one
    # thread unless told; the trainer has the CPUs it may run on to itself
    # (torch's default counts physical cores only).
    default = 1 if a.cmd == "serve" else len(os.sched_getaffinity(0))
    torch.set_num_threads(max(1, int(os.environ.get("TRAINYARD_TORCH_THREADS", default))))
    serve(a) if a.cmd == "serve" else train(a)


if __name__ == "__main__":
    main()
