"""An OTLP/HTTP trace collector on 127.0.0.1 for tests: it keeps every export request it
receives, decoded, with the time it arrived."""

from __future__ import annotations

import http.server
import threading
import time
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from naiad.testing import free_port


@dataclass
class Export:
    path: str
    request: Any  # ExportTraceServiceRequest
    at: float  # time.monotonic()

    @property
    def span_names(self) -> list[str]:
        return [s.name for rs in self.request.resource_spans for ss in rs.scope_spans for s in ss.spans]


class OtlpCollector:
    def __init__(self) -> None:
        self.exports: list[Export] = []
        self._lock = threading.Lock()
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/v1/traces"
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with collector._lock:
                    collector.exports.append(Export(self.path, request, time.monotonic()))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpCollector:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def spans(self) -> int:
        with self._lock:
            return sum(len(e.span_names) for e in self.exports)

    def wait_for_spans(self, count: int, timeout_s: float) -> float | None:
        """Seconds until `count` spans had arrived, or None when they did not in time."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            if self.spans() >= count:
                return time.monotonic() - start
            time.sleep(0.02)
        return None
