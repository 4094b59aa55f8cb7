#!/usr/bin/env python3
"""handover.py - start a command with a vhost-user socket already open, as a launcher
(libvirt, a test) hands one to a backend that follows QEMU's backend-program
conventions (`--fd N`).

  handover.py pair FD_A FD_B -- CMD...    a connected socketpair as fds FD_A and FD_B
  handover.py listen PATH FD -- CMD...    a Unix stream socket bound to PATH, listening,
                                          as fd FD (PATH is not removed afterwards)

The fds are inheritable; CMD replaces this process (exec), so CMD decides which child
gets which end (e.g. bash's `11<&-` on a command that must not hold the other end).
"""
import os
import socket
import sys


def place(sock, fd):
    """Moves sock's descriptor to number fd, inheritable."""
    if sock.fileno() != fd:
        os.dup2(sock.fileno(), fd, inheritable=True)
        sock.close()
    else:
        os.set_inheritable(fd, True)
        sock.detach()


def main(argv):
    if "--" not in argv or len(argv) < 4:
        sys.exit(__doc__)
    split = argv.index("--")
    args, command = argv[1:split], argv[split + 1:]
    if not command:
        sys.exit(__doc__)
    if args[0] == "pair" and len(args) == 3:
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        place(a, int(args[1]))
        place(b, int(args[2]))
    elif args[0] == "listen" and len(args) == 3:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(args[1])
        s.listen(4)
        place(s, int(args[2]))
    else:
        sys.exit(__doc__)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
