"""A stand-in ``label-studio`` executable for ``annotation serve`` (run as a script): like
Label Studio 1.23 it takes ``start --port P --data-dir D``, creates its SQLite database
(holding the token) in D with the process's umask, moves to the next port when P is taken,
answers ``/health`` and gives the invitation link to a request with the token."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = sys.argv[1:]
port, data = int(args[args.index("--port") + 1]), args[args.index("--data-dir") + 1]
token = os.environ["LABEL_STUDIO_USER_TOKEN"]
con = sqlite3.connect(os.path.join(data, "label_studio.sqlite3"))
con.execute("CREATE TABLE IF NOT EXISTS authtoken (key TEXT)")
con.execute("INSERT INTO authtoken VALUES (?)", (token,))
con.commit()
con.close()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/health":
            body = b'{"status": "UP"}'
        elif self.path == "/api/invite" and self.headers.get("Authorization") == f"Token {token}":
            body = json.dumps({"invite_url": "/user/signup/?token=own"}).encode()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a: object) -> None:
        pass


for p in (port, port + 1, port + 2):  # Label Studio moves on when its port is taken
    try:
        srv = ThreadingHTTPServer(("127.0.0.1", p), Handler)
        break
    except OSError:
        continue
print(f"listening on {srv.server_address[1]}", flush=True)
srv.serve_forever()
