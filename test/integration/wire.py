#!/usr/bin/env python3
"""Speaks the controller's wire protocol by hand, for tests of bad input.

wire.py PORT MESSAGE...: one connection to 127.0.0.1:PORT; each MESSAGE is
sent as one line and the reply line is printed ("<closed>" if the controller
closed the connection instead). A MESSAGE "@big:N" is N bytes of 'x'; a
MESSAGE "@cred" is replaced by a hello request with a fresh munge credential
(from `munge -S $AUTO_RESUME_MUNGE_SOCKET`, carrying the hello payload).
"""
import json
import os
import socket
import subprocess
import sys


def credential():
    return subprocess.run(["munge", "-s", "slurm-auto-resume/1 hello",
                           "-S", os.environ["AUTO_RESUME_MUNGE_SOCKET"]],
                          check=True, capture_output=True, text=True).stdout.strip()


def main():
    port = int(sys.argv[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        reader = conn.makefile("rb")
        for message in sys.argv[2:]:
            if message.startswith("@big:"):
                data = b"x" * int(message[5:])
            elif message == "@cred":
                data = json.dumps({"v": 1, "id": "h", "op": "hello", "cred": credential()}).encode()
            else:
                data = message.encode()
            try:
                conn.sendall(data + b"\n")
                line = reader.readline()
            except (BrokenPipeError, ConnectionResetError):
                line = b""
            print(line.decode().rstrip("\n") if line else "<closed>", flush=True)


if __name__ == "__main__":
    main()
