#!/usr/bin/env python3
"""qmp.py - one QMP command to a QEMU's monitor socket; its "return" as JSON on stdout.

    qmp.py SOCKET COMMAND [ARGUMENTS_JSON]

Connects to the Unix socket (QEMU's `-qmp unix:SOCKET,server=on,wait=off`), leaves
capabilities negotiation, runs COMMAND with the arguments object, prints the reply's
"return" value and exits 0; an "error" reply is printed on stderr with exit 1.
Asynchronous events QEMU sends in between are skipped.
"""
import json
import socket
import sys


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 64
    path, command = sys.argv[1], sys.argv[2]
    arguments = json.loads(sys.argv[3]) if len(sys.argv) == 4 else {}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(path)
        stream = sock.makefile("rw")

        def reply() -> dict:
            while True:
                line = stream.readline()
                if not line:
                    raise RuntimeError("QEMU closed the monitor")
                message = json.loads(line)
                if "event" not in message:
                    return message

        reply()  # the greeting
        stream.write(json.dumps({"execute": "qmp_capabilities"}) + "\n")
        stream.flush()
        reply()
        request = {"execute": command}
        if arguments:
            request["arguments"] = arguments
        stream.write(json.dumps(request) + "\n")
        stream.flush()
        answer = reply()
    if "error" in answer:
        print(json.dumps(answer["error"]), file=sys.stderr)
        return 1
    print(json.dumps(answer.get("return", {})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
