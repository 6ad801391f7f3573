"""Env plugins as vectorised envs, stepped by a Trainyard env server.

An env server (every agent runs one for the runs it places; on a laptop,
``trainyard env serve``) hosts the plugin in its WebAssembly sandbox. The
client and the server share the batch buffers (a file in /dev/shm whose
descriptor is passed over a Unix socket), so a step of 1,024 envs is one
short message each way.

    import trainyard.envs
    env = trainyard.envs.make("CartPole-v1", num_envs=1024)
    obs, info = env.reset(seed=0)
    obs, rewards, terminations, truncations, info = env.step(actions)

The API is Gymnasium's ``VectorEnv`` (0.29 and 1.x), in same-step autoreset
mode (``metadata["autoreset_mode"]``, Gymnasium 1.1's ``AutoresetMode.SAME_STEP``):
a finished env is reset inside ``step``; ``obs`` holds its new first
observation and ``info["final_observation"][i]`` the last one before the
reset (``info["_final_observation"][i]`` is True for those envs; the same
rows in one array: ``info["final_obs"]``, see StepInfo). Env i is
seeded ``seed + i`` on reset, as the plugin ABI does. When gymnasium is
importable, VecEnv subclasses ``gymnasium.vector.VectorEnv`` and its
spaces are gymnasium's.

The protocol is in docs/envserver.md.
"""

import json
import mmap
import os
import socket

import numpy as np

SOCKET_ENV = "TRAINYARD_ENV_SOCKET"
PROTOCOL = 1

try:  # optional: only to look like one to code that checks
    import gymnasium as _gym

    _Base = _gym.vector.VectorEnv
except Exception:  # noqa: BLE001 - absent or broken: plain spaces
    _gym = None
    _Base = object

# Gymnasium 1.1+ reads a vector env's autoreset mode from its metadata, as
# its AutoresetMode enum (whose value is "SameStep"); wrappers that support
# only some modes check it. Without gymnasium (or before 1.1) the value.
try:
    AUTORESET_MODE = _gym.vector.AutoresetMode.SAME_STEP
except Exception:  # noqa: BLE001 - gymnasium absent or older than 1.1
    AUTORESET_MODE = "SameStep"


class EnvServerError(RuntimeError):
    """The env server refused a request or failed a step."""


class Box:
    """A box space (gymnasium.spaces.Box's fields)."""

    def __init__(self, low, high, shape, dtype=np.float32):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.low = np.broadcast_to(np.asarray(low, dtype=self.dtype), self.shape).copy()
        self.high = np.broadcast_to(np.asarray(high, dtype=self.dtype), self.shape).copy()

    def sample(self, rng=np.random):
        lo = np.where(np.isfinite(self.low), self.low, -1.0)
        hi = np.where(np.isfinite(self.high), self.high, 1.0)
        return rng.uniform(lo, hi).astype(self.dtype)

    def __repr__(self):
        return "Box(%s, %s, %s)" % (self.low.min(), self.high.max(), self.shape)


class Discrete:
    """A discrete space of n actions 0..n-1."""

    def __init__(self, n):
        self.n = int(n)
        self.shape = ()
        self.dtype = np.dtype(np.int64)

    def sample(self, rng=np.random):
        return int(rng.randint(self.n))

    def __repr__(self):
        return "Discrete(%d)" % self.n


class MultiDiscrete:
    """Several discrete choices, nvec[i] for the i-th."""

    def __init__(self, nvec):
        self.nvec = np.asarray(nvec, dtype=np.int64)
        self.shape = self.nvec.shape
        self.dtype = np.dtype(np.int64)

    def sample(self, rng=np.random):
        return (rng.random_sample(self.nvec.shape) * self.nvec).astype(np.int64)

    def __repr__(self):
        return "MultiDiscrete(%s)" % self.nvec.tolist()


def _space(s):
    """A space from the plugin's metadata (sdk/go/envs.Space)."""
    kind = s.get("kind")
    if kind == "box":
        shape = s.get("shape") or [len(s.get("low") or [])]
        inf = np.float32(np.inf)
        low = s.get("low") or [-inf] * int(np.prod(shape))
        high = s.get("high") or [inf] * int(np.prod(shape))
        low = np.asarray(low, dtype=np.float32).reshape(shape)
        high = np.asarray(high, dtype=np.float32).reshape(shape)
        if _gym is not None:
            return _gym.spaces.Box(low=low, high=high, shape=tuple(shape), dtype=np.float32)
        return Box(low, high, shape)
    if kind == "discrete":
        return _gym.spaces.Discrete(s["n"]) if _gym is not None else Discrete(s["n"])
    if kind == "multi_discrete":
        return _gym.spaces.MultiDiscrete(s["nvec"]) if _gym is not None else MultiDiscrete(s["nvec"])
    raise EnvServerError("unknown space kind %r" % kind)


def _batched(space, n):
    if _gym is not None:
        from gymnasium.vector.utils import batch_space

        return batch_space(space, n)
    if isinstance(space, Discrete):
        return MultiDiscrete([space.n] * n)
    if isinstance(space, MultiDiscrete):
        return MultiDiscrete(np.tile(space.nvec, (n, 1)))
    return Box(np.broadcast_to(space.low, (n,) + space.shape), np.broadcast_to(space.high, (n,) + space.shape), (n,) + space.shape)


def default_socket():
    """The env server's socket: $TRAINYARD_ENV_SOCKET, else ``trainyard env serve``'s default."""
    path = os.environ.get(SOCKET_ENV)
    if path:
        return path
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "trainyard-envs.sock")
    return "/tmp/trainyard-envs-%d.sock" % os.getuid()


def make(env_id, num_envs=1, seed=0, socket_path=None, copy=True):
    """Opens ``num_envs`` instances of the env plugin ``env_id`` (a name or
    name@version the server serves) on the env server at ``socket_path``
    (default: default_socket()). ``seed`` seeds the instances' creation and
    the first reset without a seed.

    With ``copy=False``, observations, rewards and flags are views of the
    shared buffers, valid until the next step or reset.
    """
    return VecEnv(env_id, num_envs, seed, socket_path or default_socket(), copy)


_LAZY = ("final_observation", "_final_observation")


class StepInfo(dict):
    """A step's info when some env finished: ``final_obs`` (every env's
    row, valid where ``_final_obs`` is True) holds each finished env's last
    observation before its reset, in one array. Gymnasium 0.29's
    ``final_observation`` (an object array, None for the others) and
    ``_final_observation`` are built on first use (a Python object per
    finished env costs more than the step of 1,024 CartPoles), and appear
    in keys() and items() from then on; ``in`` finds them before.
    """

    __slots__ = ("_lazy",)

    def __init__(self, final, mask):
        dict.__init__(self, final_obs=final, _final_obs=mask)
        self._lazy = True

    def _build(self):
        if self._lazy:
            self._lazy = False
            mask = dict.__getitem__(self, "_final_obs")
            final = dict.__getitem__(self, "final_obs")
            objs = np.empty(len(mask), dtype=object)
            idx = np.flatnonzero(mask)
            for i, row in zip(idx.tolist(), final[idx]):
                objs[i] = row
            dict.__setitem__(self, "final_observation", objs)
            dict.__setitem__(self, "_final_observation", mask)

    def __missing__(self, key):
        if key in _LAZY and self._lazy:
            self._build()
            return dict.__getitem__(self, key)
        raise KeyError(key)

    def __contains__(self, key):
        return dict.__contains__(self, key) or (key in _LAZY and self._lazy)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def keys(self):
        self._build()
        return dict.keys(self)

    def items(self):
        self._build()
        return dict.items(self)

    def values(self):
        self._build()
        return dict.values(self)

    def __iter__(self):
        self._build()
        return dict.__iter__(self)

    def __len__(self):
        self._build()
        return dict.__len__(self)


class VecEnv(_Base):
    """``num_envs`` instances of one env plugin, stepped in lock-step."""

    metadata = {"autoreset_mode": AUTORESET_MODE}

    def __init__(self, env_id, num_envs, seed, socket_path, copy=True):
        self._sock = None
        self._mm = None
        self._copy = copy
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(socket_path)
        except OSError as e:
            sock.close()
            raise EnvServerError(
                "no env server at %s (%s): on a cluster the agent starts one for the run; "
                "locally, start `trainyard env serve`, or set %s" % (socket_path, e.strerror or e, SOCKET_ENV)
            ) from None
        self._sock = sock
        req = {"env": env_id, "num_envs": int(num_envs), "seed": int(seed)}
        sock.sendall(json.dumps(req).encode() + b"\n")
        hello, fds = self._read_hello()
        if "error" in hello:
            for fd in fds:
                os.close(fd)
            self.close()
            raise EnvServerError("env server: %s" % hello["error"])
        if hello.get("protocol") != PROTOCOL or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            self.close()
            raise EnvServerError("env server speaks protocol %r with %d fds; this client speaks %d" % (hello.get("protocol"), len(fds), PROTOCOL))
        try:
            self._mm = mmap.mmap(fds[0], hello["size"], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fds[0])
        self._rfile = sock.makefile("rb")
        self.hello = hello
        self.spec = hello["spec"]
        self.plugin = hello["plugin"]
        self.num_envs = n = hello["num_envs"]
        od, ad = hello["obs_dim"], hello["act_dim"]
        self.single_observation_space = _space(self.spec["observation_space"])
        self.single_action_space = _space(self.spec["action_space"])
        self.observation_space = _batched(self.single_observation_space, n)
        self.action_space = _batched(self.single_action_space, n)
        off = hello["offsets"]

        def view(name, dtype, count):
            return np.frombuffer(self._mm, dtype=dtype, count=count, offset=off[name])

        obs_shape = (n,) + tuple(self.single_observation_space.shape or ())
        self._actions = view("actions", "<f4", n * ad).reshape(n, ad)
        self._obs = view("obs", "<f4", n * od).reshape(obs_shape)
        self._final_obs = view("final_obs", "<f4", n * od).reshape(obs_shape)
        self._rewards = view("rewards", "<f4", n)
        self._terminated = view("terminated", np.bool_, n)
        self._truncated = view("truncated", np.bool_, n)
        self._next_seed = int(seed)
        self.closed = False

    def _read_hello(self):
        msg, fds, _, _ = socket.recv_fds(self._sock, 1 << 16, 1)
        while not msg.endswith(b"\n"):
            more = self._sock.recv(1 << 16)
            if not more:
                raise EnvServerError("env server closed the connection during the handshake")
            msg += more
        return json.loads(msg), fds

    def _call(self, line):
        if self.closed:
            raise EnvServerError("env is closed")
        self._sock.sendall(line)
        reply = self._rfile.readline()
        if reply == b"ok\n":
            return
        if not reply:
            raise EnvServerError("env server closed the connection")
        raise EnvServerError(reply.decode(errors="replace").strip())

    def _out(self, a):
        return a.copy() if self._copy else a

    def reset(self, seed=None, options=None):
        """Resets every env (env i seeded seed+i); returns (obs, info)."""
        if seed is None:
            seed = self._next_seed
        if isinstance(seed, (list, tuple, np.ndarray)):
            seed = int(seed[0])  # the ABI seeds env i with seed+i
        seed = int(seed)
        self._next_seed = seed + self.num_envs
        self._call(b"reset %d\n" % seed)
        return self._out(self._obs), {}

    def step(self, actions):
        """Steps every env; returns (obs, rewards, terminations, truncations, info)."""
        a = np.asarray(actions, dtype=np.float32)
        self._actions[...] = a.reshape(self._actions.shape)
        self._call(b"step\n")
        term, trunc = self._out(self._terminated), self._out(self._truncated)
        done = term | trunc
        info = StepInfo(self._final_obs.copy(), done) if done.any() else {}
        return self._out(self._obs), self._out(self._rewards), term, trunc, info

    def close(self, **kwargs):
        """Ends the session; the server frees the instances."""
        self.closed = True
        if self._sock is not None:
            try:
                self._sock.sendall(b"close\n")
            except OSError:
                pass
            if getattr(self, "_rfile", None) is not None:
                self._rfile.close()
            self._sock.close()
            self._sock = None
        # numpy views keep the buffer exported; drop them before unmapping
        for name in ("_actions", "_obs", "_final_obs", "_rewards", "_terminated", "_truncated"):
            self.__dict__.pop(name, None)
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass  # a caller still holds a view (copy=False): unmapped when it is freed
            self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
