#!/usr/bin/env python3
"""A bring-your-own trainer for the arithmetic env's LLM-RL loop (kind llm).

Trainer protocol v1 (docs/llm.md): each line on stdin is one batch,
{"step", "weight_version", "trajectories": [...]}. For each, the trainer
learns, writes its weights into $TRAINYARD_CHECKPOINT_DIR (atomically), and
prints "TRAINYARD_STEP step=N loss=X". The agent then publishes the dir (a
checkpoint in S3; each endpoint is told to load it) and sends the next
batch. End of stdin: exit 0. After a restart the dir holds the last
published step's state and the first batch is step $TRAINYARD_LOOP_STEP+1.

The "model" here has one parameter: how often it works a problem out
before answering (a multi-line completion) instead of answering at once.
REINFORCE on the rewards of the completions it produced moves that
probability; the endpoint loads it from policy.json. The weights also keep
the episodes they learnt from (an audit: none twice, none lost) and the
weight versions they came from. Standard library only.

  train.py [--lr 2.0] [--min-step-seconds 0]
"""
import argparse
import base64
import json
import math
import os
import sys
import time


def p_work(logit):
    return 1.0 / (1.0 + math.exp(-logit))


def worked(trajectory):
    """1 when the model's completion worked the problem out (several lines)."""
    for call in trajectory.get("calls") or []:
        body = json.loads(base64.b64decode(call["response"]))
        text = body["choices"][0]["message"]["content"].strip()
        return 1 if "\n" in text else 0
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lr", type=float, default=2.0)
    ap.add_argument("--min-step-seconds", type=float, default=0.0,
                    help="stand in for a slower (GPU) step")
    a = ap.parse_args()

    path = os.path.join(os.environ["TRAINYARD_CHECKPOINT_DIR"], "policy.json")
    state = {"logit": 0.0, "step": 0, "episodes": [], "versions": {}}
    if os.path.exists(path):  # restored by the agent
        with open(path) as f:
            state = json.load(f)
    print(f"trainer: starting after step {state['step']} "
          f"(TRAINYARD_LOOP_STEP={os.environ.get('TRAINYARD_LOOP_STEP')}), p(work it out) {p_work(state['logit']):.3f}",
          flush=True)

    for line in sys.stdin:
        start = time.monotonic()
        batch = json.loads(line)
        trajs = batch["trajectories"]
        p = p_work(state["logit"])
        rewards = [t["return"] for t in trajs]
        baseline = sum(rewards) / len(rewards)
        grad, loss = 0.0, 0.0
        for t, r in zip(trajs, rewards):
            w = worked(t)
            grad += (r - baseline) * (w - p)  # d log pi(w) / d logit
            loss -= (r - baseline) * math.log(p if w else 1 - p)
        state["logit"] += a.lr * grad / len(trajs)
        state["step"] = batch["step"]
        state["episodes"] += [t["episode"] for t in trajs]
        for t in trajs:
            v = str(t["weight_version"])
            state["versions"][v] = state["versions"].get(v, 0) + 1
        time.sleep(max(0.0, a.min_step_seconds - (time.monotonic() - start)))
        with open(path + ".tmp", "w") as f:
            json.dump(state, f)
        os.replace(path + ".tmp", path)
        step = batch["step"]
        print(f"TRAINYARD_STEP step={step} loss={loss / len(trajs):.5f}", flush=True)
        print(f"TRAINYARD_SCALAR step={step} tag=mean_reward value={baseline:.4f}", flush=True)
        print(f"TRAINYARD_SCALAR step={step} tag=p_work value={p_work(state['logit']):.4f}", flush=True)
        print(f"step {step}: mean reward {baseline:.3f}, p(work it out) {p_work(state['logit']):.3f}, "
              f"batch from weights v{min(t['weight_version'] for t in trajs)}..v{max(t['weight_version'] for t in trajs)} "
              f"(endpoints at v{batch['weight_version']})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
