#!/usr/bin/env python3
"""paced_http.py - serves one file over HTTP at a bounded rate, so a guest's download
lasts long enough to span a live migration.

    paced_http.py FILE ADDRESS PORT BYTES_PER_SECOND STATE_DIR

Every GET gets FILE (any path), in 64 KiB chunks paced to BYTES_PER_SECOND. Progress
goes to STATE_DIR: `started` is written when a transfer begins, `sent` holds the bytes
sent so far (rewritten every MiB), `finished` (with the bytes sent) when it ended; a
transfer the client broke off writes `broken`.
"""
import http.server
import os
import sys
import time

CHUNK = 64 * 1024
PROGRESS_EVERY = 1024 * 1024


def make_handler(path: str, rate: float, state: str):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's naming)
            size = os.path.getsize(path)
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            with open(os.path.join(state, "started"), "w") as marker:
                marker.write(f"{time.time():.3f}\n")
            begin = time.monotonic()
            sent = 0
            try:
                with open(path, "rb") as source:
                    while chunk := source.read(CHUNK):
                        self.wfile.write(chunk)
                        sent += len(chunk)
                        if sent % PROGRESS_EVERY == 0:
                            with open(os.path.join(state, "sent.tmp"), "w") as progress:
                                progress.write(f"{sent}\n")
                            os.replace(os.path.join(state, "sent.tmp"), os.path.join(state, "sent"))
                        # Sleep until this many bytes are due at the rate.
                        ahead = sent / rate - (time.monotonic() - begin)
                        if ahead > 0:
                            time.sleep(ahead)
                self.wfile.flush()
            except OSError as error:
                with open(os.path.join(state, "broken"), "w") as marker:
                    marker.write(f"{sent} {error}\n")
                return
            with open(os.path.join(state, "finished"), "w") as marker:
                marker.write(f"{time.time():.3f} {sent}\n")

        def log_message(self, fmt, *args):
            sys.stderr.write("paced_http: " + (fmt % args) + "\n")

    return Handler


def main() -> int:
    if len(sys.argv) != 6:
        print("usage: paced_http.py FILE ADDRESS PORT BYTES_PER_SECOND STATE_DIR", file=sys.stderr)
        return 64
    path, address, port, rate, state = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    server = http.server.ThreadingHTTPServer((address, port), make_handler(path, rate, state))
    print(f"paced_http: serving {path} on {address}:{port} at {rate:.0f} B/s", file=sys.stderr, flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
