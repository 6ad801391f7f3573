"""Steps an env through the env server with seeded random actions and
writes every transition (internal/envserver's tests compare it with the
in-process host's): a JSON header line, then raw little-endian arrays."""

import argparse
import json
import sys

import numpy as np

import trainyard.envs


def random_actions(rng, space, n):
    """Seeded actions from the plugin's action space, as float32 rows."""
    if space["kind"] == "discrete":
        return rng.randint(space["n"], size=(n, 1)).astype(np.float32)
    if space["kind"] == "multi_discrete":
        nvec = np.asarray(space["nvec"])
        return (rng.random_sample((n, len(nvec))) * nvec).astype(np.int64).astype(np.float32)
    low, high = np.asarray(space["low"], np.float32), np.asarray(space["high"], np.float32)
    return rng.uniform(low, high, size=(n, low.size)).astype(np.float32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--env", required=True)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    rng = np.random.RandomState(a.seed)
    with trainyard.envs.make(a.env, num_envs=a.num_envs, seed=a.seed, socket_path=a.socket) as env, open(a.out, "wb") as f:
        n = env.num_envs
        # Gymnasium 1.1+ wrappers read the mode from here (AutoresetMode's
        # value where gymnasium is installed, the same string where not).
        mode = env.metadata["autoreset_mode"]
        if getattr(mode, "value", mode) != "SameStep":
            sys.exit("metadata autoreset_mode is %r, want SameStep" % (mode,))
        obs, _ = env.reset(seed=a.seed)
        f.write(json.dumps({"num_envs": n, "steps": a.steps, "obs_dim": env.hello["obs_dim"], "act_dim": env.hello["act_dim"]}).encode() + b"\n")
        f.write(obs.astype("<f4").tobytes())
        for _ in range(a.steps):
            actions = random_actions(rng, env.spec["action_space"], n)
            obs, rew, term, trunc, info = env.step(actions)
            final = np.zeros_like(obs)
            if "final_observation" in info:
                for i in np.flatnonzero(info["_final_observation"]):
                    final[i] = info["final_observation"][i]
            for arr in (actions, obs, rew, term.astype(np.uint8), trunc.astype(np.uint8), final):
                f.write(np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
