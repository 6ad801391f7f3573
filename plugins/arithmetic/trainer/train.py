#!/usr/bin/env python3
"""A bring-your-own trainer (run algorithm "command") for the arithmetic env.

It learns which prompt style (the env's action: 0 answer only, 1 work it out)
gets the model's answers right, by REINFORCE on a two-armed softmax policy:
pull a batch of trajectories from the trajectory pool, step the logits,
write them to $TRAINYARD_CHECKPOINT_DIR/weights/policy.json (synced to S3 by
the agent) and ask the weight-sync controller to publish them; the rollout
workers' policy then samples from the new logits. Standard library only.

  train.py --pool URL --weights URL [--iterations 20] [--batch 32] [--lr 0.5]
"""
import argparse
import json
import math
import os
import sys
import urllib.request


def softmax(logits):
    m = max(logits)
    e = [math.exp(x - m) for x in logits]
    s = sum(e)
    return [x / s for x in e]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.5)
    a = ap.parse_args()

    ckpt = os.environ["TRAINYARD_CHECKPOINT_DIR"]
    wdir = os.path.join(ckpt, "weights")
    os.makedirs(wdir, exist_ok=True)
    path = os.path.join(wdir, "policy.json")
    logits, start = [0.0, 0.0], 0
    if os.path.exists(path):  # restored by the agent after a restart
        with open(path) as f:
            saved = json.load(f)
        logits, start = saved["logits"], saved["iteration"]

    for it in range(start + 1, a.iterations + 1):
        with urllib.request.urlopen(f"{a.pool}/v1/batch?n={a.batch}&wait=60s", timeout=90) as r:
            if r.status != 200:
                print(f"iteration {it}: no batch ({r.status})", flush=True)
                continue
            batch = json.load(r)
        probs = softmax(logits)
        rewards = [t["return"] for t in batch]
        baseline = sum(rewards) / len(rewards)
        grad = [0.0, 0.0]
        for t, rew in zip(batch, rewards):
            style = int(t["steps"][0]["action"][0])
            for k in range(2):
                grad[k] += (rew - baseline) * ((1.0 if k == style else 0.0) - probs[k])
        logits = [l + a.lr * g / len(batch) * 4 for l, g in zip(logits, grad)]
        versions = sorted({t["weight_version"] for t in batch})
        with open(path + ".tmp", "w") as f:
            json.dump({"logits": logits, "iteration": it}, f)
        os.replace(path + ".tmp", path)
        req = urllib.request.Request(f"{a.weights}/v1/weights", method="POST",
                                     data=json.dumps({"dir": wdir, "iteration": it}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            pub = json.load(r)
        print(f"iteration {it}: mean reward {baseline:.3f} p(work it out) {softmax(logits)[1]:.3f} "
              f"batch versions {versions} -> published v{pub['version']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
