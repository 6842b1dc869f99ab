"""A small OpenAI-compatible HTTP server on 127.0.0.1 that answers from a script of faults, for
tests of how the API backbones retry and report. Both clients (openai, mistralai) post to
`.../chat/completions`, the echo scorer to `.../completions`; the server answers every POST with
the next reply of its script and repeats the last one when the script runs out. A reply may be
a function, called when it is sent (for headers that depend on the time)."""

from __future__ import annotations

import json
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = "a usable answer"


def completion(choices: list | None, usage: bool = True) -> dict:
    body = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "test",
        "choices": choices,
    }
    if usage:
        body["usage"] = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    return body


# Each reply: (status, headers, body bytes).
def ok() -> tuple:
    message = {"role": "assistant", "content": ANSWER}
    return (
        200,
        {"content-type": "application/json"},
        json.dumps(completion([{"index": 0, "finish_reason": "stop", "message": message}])).encode(),
    )


def not_json(content_type: str = "text/html") -> tuple:
    return 200, {"content-type": content_type}, b"<html><body>502 upstream hiccup</body></html>"


def empty_choices() -> tuple:
    return 200, {"content-type": "application/json"}, json.dumps(completion([])).encode()


def no_content() -> tuple:
    message = {"role": "assistant"}
    return (
        200,
        {"content-type": "application/json"},
        json.dumps(completion([{"index": 0, "finish_reason": "stop", "message": message}])).encode(),
    )


def rate_limited(retry_after: str | None) -> tuple:
    headers = {"content-type": "application/json"}
    if retry_after is not None:
        headers["retry-after"] = retry_after
    body = {"error": {"message": "rate limited", "type": "rate_limit", "code": "429"}}
    return 429, headers, json.dumps(body).encode()


def refused(status: int = 404) -> tuple:
    """How a server answers a request or an endpoint it does not support."""
    body = {"error": {"message": "not supported", "type": "invalid_request_error", "code": str(status)}}
    return status, {"content-type": "application/json"}, json.dumps(body).encode()


def text_completion(text: str, logprobs: dict | None = None) -> tuple:
    """A legacy /completions reply: `text` and, if given, its tokens' log-probs."""
    body = completion([{"index": 0, "finish_reason": "length", "text": text, "logprobs": logprobs}])
    body["object"] = "text_completion"
    return 200, {"content-type": "application/json"}, json.dumps(body).encode()


def http_date(seconds_from_now: float) -> str:
    return formatdate(time.time() + seconds_from_now, usegmt=True)


class FaultServer:
    def __init__(self) -> None:
        self.script: list[tuple] = [ok()]
        self.hits: list[float] = []  # monotonic time of each request
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
                self.rfile.read(int(self.headers.get("content-length") or 0))
                with server._lock:
                    server.hits.append(time.monotonic())
                    reply = server.script[min(len(server.hits), len(server.script)) - 1]
                status, headers, body = reply() if callable(reply) else reply
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def play(self, *replies: tuple) -> None:
        with self._lock:
            self.script, self.hits = list(replies), []

    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.hits, self.hits[1:])]

    def __enter__(self) -> FaultServer:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()
