"""PPO in PyTorch on any Trainyard env plugin (discrete or box actions).

The envs are the plugin's, stepped by an env server in its WebAssembly
sandbox (trainyard.envs); the learning is here, on CUDA when the run gives
this process a GPU (CUDA_VISIBLE_DEVICES), else on the CPU. It checkpoints
to $TRAINYARD_CHECKPOINT_DIR (synced to S3 on a cluster) and resumes from
it, and reports its curves as TRAINYARD_SCALAR lines (trainyard.report).

    # on a cluster: the agent serves the run's --env to the trainer
    trainyard run train --cluster lab --env CartPole-v1 --gpus 1 -- \\
        python3 /path/to/sdk/python/examples/pytorch_ppo.py --target-return 475
    # on a laptop
    trainyard env serve &
    python3 sdk/python/examples/pytorch_ppo.py --env CartPole-v1

The algorithm is CleanRL's ppo.py / ppo_continuous_action.py (GAE,
clipped surrogate, value clipping off, advantage normalisation, annealed
learning rate), with truncated episodes bootstrapped from their final
observation.
"""

import argparse
import os
import sys
import time
from collections import deque

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # sdk/python, when run from the source tree

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import trainyard  # noqa: E402
import trainyard.envs  # noqa: E402


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default=os.environ.get("TRAINYARD_ENV", "CartPole-v1"), help="env plugin (the run's, on a cluster)")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=128, help="steps per env per rollout")
    p.add_argument("--total-timesteps", type=int, default=500_000)
    p.add_argument("--target-return", type=float, default=None, help="stop once the mean of the last 20 episodes reaches it")
    p.add_argument("--lr", type=float, default=2.5e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--checkpoint-every", type=int, default=10, help="iterations between checkpoints")
    return p.parse_args()


def layer(i, o, std=np.sqrt(2)):
    m = nn.Linear(i, o)
    nn.init.orthogonal_(m.weight, std)
    nn.init.constant_(m.bias, 0.0)
    return m


class Agent(nn.Module):
    def __init__(self, obs_dim, act_space, hidden):
        super().__init__()
        self.discrete = hasattr(act_space, "n")
        act_out = act_space.n if self.discrete else int(np.prod(act_space.shape))
        self.critic = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(), layer(hidden, 1, 1.0))
        self.actor = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(), layer(hidden, act_out, 0.01))
        if not self.discrete:
            self.log_std = nn.Parameter(torch.zeros(1, act_out))

    def value(self, x):
        return self.critic(x).squeeze(-1)

    def dist(self, x):
        out = self.actor(x)
        if self.discrete:
            return torch.distributions.Categorical(logits=out)
        return torch.distributions.Normal(out, self.log_std.expand_as(out).exp())

    def act(self, x, action=None):
        d = self.dist(x)
        if action is None:
            action = d.sample()
        logp, ent = d.log_prob(action), d.entropy()
        if not self.discrete:
            logp, ent = logp.sum(-1), ent.sum(-1)
        return action, logp, ent, self.value(x)


def save(path, state):
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)  # a sync never sees half a checkpoint


def main():
    a = parse()
    device = torch.device("cuda" if os.environ.get("CUDA_VISIBLE_DEVICES") and torch.cuda.is_available() else "cpu")
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    torch.set_num_threads(1)  # small nets: threads cost more than they give
    env = trainyard.envs.make(a.env, num_envs=a.num_envs, seed=a.seed)
    print("training %s (%s) on %s" % (env.plugin, a.env, device), flush=True)
    n, T = env.num_envs, a.num_steps
    obs_shape = env.single_observation_space.shape
    obs_dim = int(np.prod(obs_shape))
    act_space = env.single_action_space
    discrete = hasattr(act_space, "n")
    act_shape = () if discrete else act_space.shape
    if not discrete:
        low = torch.tensor(act_space.low, device=device)
        high = torch.tensor(act_space.high, device=device)
    agent = Agent(obs_dim, act_space, a.hidden).to(device)
    opt = torch.optim.Adam(agent.parameters(), lr=a.lr, eps=1e-5)
    batch = n * T
    iterations = a.total_timesteps // batch
    mb = batch // a.minibatches

    ckpt = os.path.join(trainyard.checkpoint_dir(), "ppo.pt")
    start, global_step, returns = 1, 0, deque(maxlen=20)
    best = None  # the best mean of 20 episodes this process saw
    if os.path.exists(ckpt):
        s = torch.load(ckpt, map_location=device)  # tensors, numbers and lists only: loads with weights_only too
        agent.load_state_dict(s["agent"])
        opt.load_state_dict(s["opt"])
        start, global_step = s["iteration"] + 1, s["global_step"]
        returns.extend(s["returns"])
        torch.set_rng_state(s["torch_rng"].cpu())
        print("resumed from %s: iteration %d, %d steps" % (ckpt, s["iteration"], global_step), flush=True)

    obs_buf = torch.zeros((T, n, obs_dim), device=device)
    act_buf = torch.zeros((T, n) + act_shape, device=device, dtype=torch.long if discrete else torch.float32)
    logp_buf = torch.zeros((T, n), device=device)
    rew_buf = torch.zeros((T, n), device=device)
    done_buf = torch.zeros((T, n), device=device)
    val_buf = torch.zeros((T, n), device=device)

    o, _ = env.reset(seed=a.seed + start * n)
    next_obs = torch.tensor(o, device=device).reshape(n, obs_dim)
    next_done = torch.zeros(n, device=device)
    ep_ret = np.zeros(n)  # the running episodes' returns (lost on a restart: they start afresh)
    t0, steps0 = time.time(), global_step
    for it in range(start, iterations + 1):
        for g in opt.param_groups:
            g["lr"] = a.lr * (1.0 - (it - 1.0) / iterations)
        for t in range(T):
            global_step += n
            obs_buf[t], done_buf[t] = next_obs, next_done
            with torch.no_grad():
                action, logp, _, value = agent.act(next_obs)
            act_buf[t], logp_buf[t], val_buf[t] = action, logp, value
            sent = action.cpu().numpy()
            if not discrete:
                sent = torch.clamp(action, low, high).cpu().numpy()
            o, raw, term, trunc, info = env.step(sent.reshape(n, -1))
            done = term | trunc
            ep_ret += raw
            for i in np.flatnonzero(done):
                returns.append(ep_ret[i])
                ep_ret[i] = 0.0
            r = torch.tensor(raw, device=device)
            if trunc.any():  # cut short, not ended: bootstrap from where it stopped
                idx = np.flatnonzero(trunc & ~term)
                if len(idx):
                    fin = torch.tensor(info["final_obs"][idx], device=device).reshape(len(idx), obs_dim)
                    with torch.no_grad():
                        r[idx] += a.gamma * agent.value(fin)
            rew_buf[t] = r
            next_obs = torch.tensor(o, device=device).reshape(n, obs_dim)
            next_done = torch.tensor(done, device=device, dtype=torch.float32)
        advantages, returns_t = gae(a, agent, next_obs, next_done, rew_buf, done_buf, val_buf)
        b_obs, b_act = obs_buf.reshape(batch, obs_dim), act_buf.reshape((batch,) + act_shape)
        b_logp, b_adv, b_ret = logp_buf.reshape(-1), advantages.reshape(-1), returns_t.reshape(-1)
        for _ in range(a.epochs):
            perm = torch.randperm(batch, device=device)
            for s in range(0, batch, mb):
                i = perm[s : s + mb]
                _, logp, ent, v = agent.act(b_obs[i], b_act[i])
                ratio = (logp - b_logp[i]).exp()
                adv = b_adv[i]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - a.clip, 1 + a.clip)).mean()
                vl = 0.5 * ((v - b_ret[i]) ** 2).mean()
                loss = pg - a.ent_coef * ent.mean() + a.vf_coef * vl
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), a.max_grad_norm)
                opt.step()
        sps = (global_step - steps0) / max(time.time() - t0, 1e-9)
        scalars = {"losses/policy_loss": pg.item(), "losses/value_loss": vl.item(), "charts/steps_per_second": sps}
        mean = float(np.mean(returns)) if returns else None
        if mean is not None and len(returns) == returns.maxlen:
            best = mean if best is None else max(best, mean)
        if mean is not None:
            scalars["charts/episodic_return"] = mean
        trainyard.report(global_step, **scalars)
        state = lambda: {"agent": agent.state_dict(), "opt": opt.state_dict(), "iteration": it, "global_step": global_step,  # noqa: E731
                         "returns": [float(x) for x in returns], "torch_rng": torch.get_rng_state()}
        if it % a.checkpoint_every == 0 or it == iterations:
            save(ckpt, state())
        print("iteration %d/%d  steps %d  return %s  %.0f steps/s" % (it, iterations, global_step, "-" if mean is None else "%.1f" % mean, sps), flush=True)
        if a.target_return is not None and mean is not None and len(returns) == returns.maxlen and mean >= a.target_return:
            save(ckpt, state())
            print("target reached: mean return %.1f over the last %d episodes at %d steps" % (mean, len(returns), global_step), flush=True)
            return 0
    env.close()
    if a.target_return is not None:
        print("target not reached (best mean of 20 episodes %s, last %s)" % (best, mean), flush=True)
        return 1
    return 0


def gae(a, agent, next_obs, next_done, rew, done, val):
    T = rew.shape[0]
    with torch.no_grad():
        next_value = agent.value(next_obs)
    adv = torch.zeros_like(rew)
    last = 0
    for t in reversed(range(T)):
        nonterminal = 1.0 - (next_done if t == T - 1 else done[t + 1])
        nv = next_value if t == T - 1 else val[t + 1]
        delta = rew[t] + a.gamma * nv * nonterminal - val[t]
        last = delta + a.gamma * a.gae_lambda * nonterminal * last
        adv[t] = last
    return adv, adv + val


if __name__ == "__main__":
    sys.exit(main())
