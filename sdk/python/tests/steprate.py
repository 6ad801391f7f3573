"""Steps an env through the env server on request, for internal/envserver's
benchmark: each stdin line K steps it K times (the same seeded random
actions the Go side uses, cycled) and answers the seconds it took."""

import argparse
import sys
import time

import numpy as np

import trainyard.envs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--env", required=True)
    p.add_argument("--num-envs", type=int, required=True)
    a = p.parse_args()
    with trainyard.envs.make(a.env, num_envs=a.num_envs, socket_path=a.socket) as env:
        env.reset(seed=0)
        rng = np.random.RandomState(0)
        actions = [rng.randint(2, size=a.num_envs).astype(np.float32) for _ in range(16)]
        print("ready", flush=True)
        for line in sys.stdin:
            k = int(line)
            t0 = time.perf_counter()
            for i in range(k):
                env.step(actions[i % 16])
            print(time.perf_counter() - t0, flush=True)


if __name__ == "__main__":
    sys.exit(main())
