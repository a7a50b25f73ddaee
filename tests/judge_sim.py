"""A simulated OpenAI-compatible judge for the vdr.judge tests.

``SimJudge`` serves ``POST /v1/chat/completions`` on 127.0.0.1 (random port, a thread). Its answers
derive from known latent relevance: for query ``q`` and page ``d`` with latent ``z[q, d]``:

* tournament: ``s = scale[q] * z + noise * N(0, 1) + bias * (1 - 2 p / (w - 1))`` at display
  position ``p`` of a window of ``w`` (a position bias favouring early pages), clipped to [-5, 5];
* rubric: criterion ``c`` passes with probability ``sigmoid(gamma_c (z + offset[q] - beta_c))``
  (one global scale: ``offset`` is the cross-query shift calibration must recover).

Noise is drawn from a generator seeded by the request body, so an identical request gets an
identical answer. Page ids are parsed from the prompt (text pages start with ``page-id: <id>``;
image pages are recognised by their data URL). ``mode`` switches to malformed answers, HTTP 500 or
slow answers (for timeouts); ``ok_first`` answers that many requests normally before the mode applies.
A subclass may override ``answer`` and return ``(content, finish_reason)`` (e.g. ``"length"``).
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

CRIT = ("C1", "C2", "C3", "C4", "C5")


def dead_endpoint() -> str:
    """The ``/v1`` URL of a free local port that nothing listens on (a connection to it is refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here
    return f"http://127.0.0.1:{port}/v1"


class SimJudge:
    def __init__(self, latent, *, offsets=None, scale=None, noise=0.3, bias=0.0,
                 gamma=(1.5, 1.2, 1.0, 0.8, 1.5), beta=(-1.5, -0.5, 0.0, 0.7, 1.3), image_ids=None):
        self.latent = dict(latent)  # {(qid, pid): z}
        self.offsets = dict(offsets or {})
        self.scale = dict(scale or {})
        self.noise, self.bias = noise, bias
        self.gamma, self.beta = np.array(gamma), np.array(beta)
        self.image_ids = dict(image_ids or {})  # data URL -> pid
        self.mode = "ok"
        self.ok_first = 0
        self.hits = 0
        self.auth = set()
        self.lock = threading.Lock()
        sim = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(n)
                with sim.lock:
                    sim.hits += 1
                    hit = sim.hits
                    sim.auth.add(self.headers.get("Authorization", ""))
                mode = "ok" if hit <= sim.ok_first else sim.mode
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": "not found"}})
                if mode == "http500":
                    return self._send(500, {"error": {"message": "simulated failure", "type": "server_error"}})
                if mode == "slow":
                    time.sleep(1.5)
                req = json.loads(body)
                content = "Sure, here you go: scores look fine." if mode == "malformed" else sim.answer(req, body)
                finish = "stop"
                if isinstance(content, tuple):  # a subclass may answer (content, finish_reason)
                    content, finish = content
                self._send(200, {"id": "sim", "object": "chat.completion", "created": 0, "model": req["model"],
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                              "finish_reason": finish}],
                                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

            def _send(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def answer(self, req, body: bytes) -> str:
        user = req["messages"][-1]["content"]
        if isinstance(user, str):
            text = user
            pids = re.findall(r"\[doc_\d+\]\npage-id: (\S+)", text)
        else:
            text = "\n".join(p["text"] for p in user if p["type"] == "text")
            pids = [self.image_ids[p["image_url"]["url"]] for p in user if p["type"] == "image_url"]
        q = re.search(r"Query: (\S+)", text).group(1)
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(body).digest()[:8], "little"))
        w = len(pids)
        labels = [f"doc_{i + 1}" for i in range(w)]
        if "TASK: tournament" in text:
            out = {}
            for p, (lab, d) in enumerate(zip(labels, pids)):
                pos = self.bias * (1 - 2 * p / (w - 1)) if w > 1 else 0.0
                s = self.scale.get(q, 1.0) * self.latent[(q, d)] + self.noise * rng.standard_normal() + pos
                out[lab] = round(float(np.clip(s, -5, 5)), 3)
            return json.dumps({"scores": out})
        out = {}
        for lab, d in zip(labels, pids):
            th = self.latent[(q, d)] + self.offsets.get(q, 0.0)
            pr = 1 / (1 + np.exp(-self.gamma * (th - self.beta)))
            out[lab] = {c: int(rng.random() < pc) for c, pc in zip(CRIT, pr)}
        return json.dumps({"answers": out})
