"""A small stand-in for the APIs behind the gateway, on 127.0.0.1: vLLM's OpenAI-compatible API
(``/v1/chat/completions``, ``/v1/embeddings``, ``/v1/models``, ``/health``) and the Bedrock runtime
(``/model/<id>/converse`` for chat, ``/model/<id>/invoke`` for embeddings).

Each instance records what it was asked (path and model) and can be made slow or failing, so the
tests see which backend the gateway really used. Nothing here imitates the gateway itself.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote


@dataclass
class Call:
    path: str
    model: str
    kind: str  # chat | embedding


@dataclass
class Behaviour:
    """``status`` other than 200 answers every request with that status; ``delay`` seconds first. ``text``:
    the failing answer's body as plain text (what an Envoy immediate response carries) instead of JSON."""

    status: int = 200
    delay: float = 0.0
    text: str | None = None


@dataclass
class ModelStandIn:
    """One server; ``calls`` lists every request it answered, in order."""

    name: str
    behaviour: Behaviour = field(default_factory=Behaviour)
    calls: list[Call] = field(default_factory=list)
    #: Like vLLM's ``--api-key``: a model listed here answers ``/v1`` only with ``Bearer <key>``.
    api_keys: dict[str, str] = field(default_factory=dict)
    rejected: list[Call] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> ModelStandIn:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.startswith("/health"):
                    self._reply(200, {})
                elif self.path.startswith("/v1/models"):
                    self._reply(200, {"object": "list", "data": [{"id": stand_in.name, "object": "model"}]})
                else:
                    self._reply(404, {"error": "not found"})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                path = unquote(self.path)
                if path.startswith("/model/"):
                    model = path.split("/")[2]
                    kind = "chat" if path.endswith("/converse") else "embedding" if "embed" in model else "chat"
                else:
                    model = str(body.get("model", ""))
                    kind = "embedding" if path.endswith("/embeddings") else "chat"
                expected = stand_in.api_keys.get(model)
                if path.startswith("/v1/") and expected is not None and self.headers.get("authorization") != f"Bearer {expected}":
                    stand_in.rejected.append(Call(path=path, model=model, kind=kind))
                    self._reply(401, {"error": "Unauthorized"})
                    return
                stand_in.calls.append(Call(path=path, model=model, kind=kind))
                behaviour = stand_in.behaviour
                if behaviour.delay:
                    time.sleep(behaviour.delay)
                if behaviour.status != 200 and behaviour.text is not None:
                    data = behaviour.text.encode()
                    self.send_response(behaviour.status)
                    self.send_header("content-type", "text/plain")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if behaviour.status != 200:
                    self._reply(behaviour.status, {"error": {"message": f"{stand_in.name} unavailable", "code": behaviour.status}})
                    return
                self._reply(200, self._answer(path, model, kind, body))

            def _answer(self, path: str, model: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
                text = f"answer from {stand_in.name}"
                if path.startswith("/model/") and path.endswith("/converse"):
                    return {
                        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                        "stopReason": "end_turn",
                        "usage": {"inputTokens": 5, "outputTokens": 4, "totalTokens": 9},
                        "metrics": {"latencyMs": 1},
                    }
                if path.startswith("/model/"):
                    if "cohere" in model:
                        return {"id": "x", "embeddings": [[0.1] * 8], "texts": body.get("texts", []), "response_type": "embeddings_floats"}
                    return {"embedding": [0.1] * 8, "inputTextTokenCount": 3}
                if kind == "embedding":
                    inputs = body.get("input")
                    count = len(inputs) if isinstance(inputs, list) else 1
                    return {
                        "object": "list",
                        "model": model,
                        "data": [{"object": "embedding", "index": i, "embedding": [0.1] * 8} for i in range(count)],
                        "usage": {"prompt_tokens": 3, "total_tokens": 3},
                    }
                return {
                    "id": "chatcmpl-standin",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9},
                }

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
