"""Your model in Trainyard's self-play: an evaluator serving the platform's search.

The self-play engine (MCTS over the game plugin) asks a model for priors and
values at the leaves it expands. ``serve(evaluate)`` makes a Python function
that model:

    import trainyard.selfplay

    def evaluate(obs):               # obs: float32 [batch, obs_dim]
        logits, values = net(obs)     # [batch, num_actions], [batch, num_players]
        return logits, values

    trainyard.selfplay.serve(evaluate)   # on $TRAINYARD_EVAL_SOCKET

``logits`` are unnormalised scores over every action (the engine masks the
illegal ones and takes the softmax); ``values[:, i]`` is the expected
outcome, in [-1, 1], for the player i seats after the one to move
(``values[:, 0]`` is the mover's own). The engine gathers leaves across the
games it plays at once, so ``evaluate`` sees batches of up to ``max_batch``
rows (hundreds). It may return numpy arrays or anything ``np.asarray`` takes
(a CPU torch tensor: ``.cpu().numpy()`` it first if it lives on a GPU).

The protocol (version 1; ``internal/selfplay/evaluator`` is the client):

1. The engine connects to the socket and sends one JSON line,
   ``{"protocol": 1, "obs_dim": D, "num_actions": A, "num_players": P,
   "max_batch": B}``, with the descriptor of a shared file attached
   (``SCM_RIGHTS``): float32 little-endian ``obs`` [B, D] at offset 0,
   ``logits`` [B, A] at ``offsets["logits"]``, ``values`` [B, P] at
   ``offsets["values"]`` (the line carries ``offsets`` and ``size``).
2. The evaluator answers one JSON line, ``{"protocol": 1, "model": NAME}``,
   or ``{"error": "..."}`` and closes.
3. Then lines ``eval N``: the first N rows of ``obs`` are read, ``logits``
   and ``values`` written, and ``ok`` answered, or ``error: MESSAGE`` (the
   engine stops with that message). ``close``, or closing the socket, ends
   the session.

Each connection is served on a thread of its own; ``evaluate`` is called
under one lock, so a model on one GPU is never entered twice at once.
"""

import json
import mmap
import os
import socket
import sys
import threading

import numpy as np

SOCKET_ENV = "TRAINYARD_EVAL_SOCKET"
PROTOCOL = 1


class _Session:
    def __init__(self, conn, evaluate, lock, model):
        self.conn = conn
        self.evaluate = evaluate
        self.lock = lock
        self.model = model

    def _reply(self, obj):
        self.conn.sendall(json.dumps(obj).encode() + b"\n")

    def run(self):
        conn = self.conn
        try:
            msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 1)
            while msg and not msg.endswith(b"\n"):
                more = conn.recv(1 << 16)
                if not more:
                    return
                msg += more
            if not msg:
                return
            try:
                hello = json.loads(msg)
                if hello.get("protocol") != PROTOCOL:
                    raise ValueError("the engine speaks protocol %r; this evaluator speaks %d" % (hello.get("protocol"), PROTOCOL))
                if len(fds) != 1:
                    raise ValueError("want one shared-file descriptor, got %d" % len(fds))
                b, d, a, p = (int(hello[k]) for k in ("max_batch", "obs_dim", "num_actions", "num_players"))
                off = hello["offsets"]
                mm = mmap.mmap(fds[0], int(hello["size"]), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            except (ValueError, KeyError, TypeError, OSError) as e:
                self._reply({"error": str(e)})
                return
            finally:
                for fd in fds:
                    os.close(fd)
            obs = np.frombuffer(mm, dtype="<f4", count=b * d, offset=0).reshape(b, d)
            logits = np.frombuffer(mm, dtype="<f4", count=b * a, offset=off["logits"]).reshape(b, a)
            values = np.frombuffer(mm, dtype="<f4", count=b * p, offset=off["values"]).reshape(b, p)
            self._reply({"protocol": PROTOCOL, "model": self.model})
            rfile = conn.makefile("rb")
            try:
                for line in rfile:
                    cmd = line.decode().split()
                    if not cmd or cmd[0] == "close":
                        return
                    if cmd[0] != "eval" or len(cmd) != 2:
                        conn.sendall(("error: unknown command %r\n" % line.decode().strip()).encode())
                        return
                    n = int(cmd[1])
                    if not 0 < n <= b:
                        conn.sendall(b"error: batch %d outside 1..%d\n" % (n, b))
                        return
                    try:
                        with self.lock:
                            lg, v = self.evaluate(obs[:n])
                        lg = np.asarray(lg, dtype=np.float32).reshape(n, a)
                        v = np.asarray(v, dtype=np.float32).reshape(n, p)
                    except Exception as e:  # noqa: BLE001 - the engine reports it as the reason
                        conn.sendall(("error: evaluate: %s: %s\n" % (type(e).__name__, e)).encode().replace(b"\n", b" ").strip() + b"\n")
                        return
                    logits[:n] = lg
                    values[:n] = v
                    conn.sendall(b"ok\n")
            finally:
                rfile.close()
                del obs, logits, values
                mm.close()
        finally:
            conn.close()


def serve(evaluate, socket_path=None, model="", ready=None):
    """Serve evaluate on a Unix socket until the process is stopped.

    socket_path defaults to $TRAINYARD_EVAL_SOCKET; model names the model in
    the engine's records (default: the script's name). ready, if given, is
    called once the socket listens.
    """
    path = socket_path or os.environ.get(SOCKET_ENV)
    if not path:
        raise RuntimeError("no socket: pass socket_path or set %s" % SOCKET_ENV)
    model = model or os.path.basename(sys.argv[0] or "evaluator")
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    lock = threading.Lock()
    if ready:
        ready()
    try:
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=_Session(conn, evaluate, lock, model).run, daemon=True).start()
    finally:
        srv.close()
