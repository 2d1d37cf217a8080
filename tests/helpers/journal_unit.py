"""Run a command as a systemd unit would run it, with no systemd: in the unit's cgroup (journald reads the
unit from the sender's cgroup: `_SYSTEMD_UNIT`), with stdout and stderr on journald's stream socket (what
StandardOutput=journal does; the header is the one of systemd's journald-stream.c).

Usage: journal_unit.py CGROUP_DIR STDOUT_SOCKET IDENTIFIER -- COMMAND ARGS...
"""

from __future__ import annotations

import os
import socket
import sys


def main(argv: list[str]) -> int:
    cgroup, sock_path, ident = argv[0], argv[1], argv[2]
    command = argv[4:] if argv[3] == "--" else argv[3:]
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:  # before connecting: journald reads it then
        f.write(str(os.getpid()))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    # identifier, unit id, priority, level prefix, forward to syslog, kmsg, console
    s.sendall(f"{ident}\n\n6\n0\n0\n0\n0\n".encode())
    s.shutdown(socket.SHUT_RD)
    os.dup2(s.fileno(), 1)
    os.dup2(s.fileno(), 2)
    s.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
