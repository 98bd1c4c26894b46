"""A local HTTP server on 127.0.0.1 serving in-memory files, with HEAD and Range support.

`server.files[name] = bytes`; `server.requests` logs (method, path, range header).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output quiet
        pass

    def _lookup(self) -> bytes | None:
        self.server.requests.append((self.command, self.path, self.headers.get("Range")))
        return self.server.files.get(self.path.lstrip("/"))

    def do_HEAD(self):
        data = self._lookup()
        if data is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()

    def do_GET(self):
        data = self._lookup()
        if data is None:
            self.send_error(404)
            return
        rng = self.headers.get("Range")
        if rng and self.server.ranges:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.end_headers()
                return
            body = data[start:]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            body = data
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        cut = self.server.truncate_to
        self.wfile.write(body if cut is None else body[:cut])
        if cut is not None:
            self.server.truncate_to = None  # only the first response is cut
            self.close_connection = True


class LocalServer:
    def __init__(self, ranges: bool = True):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.files = {}
        self.httpd.requests = []
        self.httpd.ranges = ranges
        self.httpd.truncate_to = None  # cut the next GET body after this many bytes
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def files(self) -> dict[str, bytes]:
        return self.httpd.files

    @property
    def requests(self) -> list:
        return self.httpd.requests

    def __enter__(self) -> LocalServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
