"""A loopback server for scripts/bulk-bodies: GET /file sends the file named
on the command line (sendfile, with its length); PUT or POST /upload reads
the body (by Content-Length or chunked), hashes it as it comes and answers
"<sha256 hex> <length>". Prints its port on the first line of stdout."""

import hashlib
import http.server
import os
import socket
import sys

PATH = sys.argv[1]
CHUNK = 1 << 20


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        size = os.path.getsize(PATH)
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        with open(PATH, "rb") as f:
            self.wfile.flush()
            self.connection.sendfile(f)

    def _read_body(self, digest):
        length = self.headers.get("Content-Length")
        total = 0
        if length is not None:
            left = int(length)
            while left:
                data = self.rfile.read(min(CHUNK, left))
                if not data:
                    raise ConnectionError("body cut short")
                digest.update(data)
                left -= len(data)
                total += len(data)
            return total
        # chunked
        while True:
            size = int(self.rfile.readline().split(b";")[0], 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b""):
                    pass
                return total
            left = size
            while left:
                data = self.rfile.read(min(CHUNK, left))
                digest.update(data)
                left -= len(data)
            total += size
            self.rfile.readline()

    def do_PUT(self):
        digest = hashlib.sha256()
        total = self._read_body(digest)
        body = f"{digest.hexdigest()} {total}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PUT


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
print(server.server_address[1], flush=True)
server.serve_forever()
