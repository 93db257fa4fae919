#!/usr/bin/env python3
"""Speaks the controller's wire protocol by hand, for tests of bad input.

wire.py PORT MESSAGE...: one connection to 127.0.0.1:PORT; each MESSAGE is
sent as one line and the reply line is printed ("<closed>" if the controller
closed the connection instead). A MESSAGE "@big:N" is N bytes of 'x'; a
MESSAGE "@cred" is replaced by a hello request with a fresh munge credential
(from `munge -S $AUTO_RESUME_MUNGE_SOCKET`, carrying the hello payload).

wire.py --requests PORT [REQUEST...]: the same, where each REQUEST is
"OP JSON-OBJECT" (the op's own fields) and is sent as a whole request of
that op: version, id and a fresh munge credential made by whoever runs this
for that op are added here, the one place that knows how a request is
framed and signed. Without REQUEST arguments, one REQUEST per line of stdin.
"""
import itertools
import json
import os
import socket
import subprocess
import sys

PROTOCOL = 1


def credential(op="hello"):
    return subprocess.run(["munge", "-s", f"slurm-auto-resume/{PROTOCOL} {op}",
                           "-S", os.environ["AUTO_RESUME_MUNGE_SOCKET"]],
                          check=True, capture_output=True, text=True).stdout.strip()


def request(line, number):
    op, _, fields = line.partition(" ")
    body = json.loads(fields) if fields.strip() else {}
    return json.dumps({"v": PROTOCOL, "id": number, "op": op, **body,
                       "cred": credential(op)}).encode()


def message(text):
    if text.startswith("@big:"):
        return b"x" * int(text[5:])
    if text == "@cred":
        return request("hello {}", "h")
    return text.encode()


def main():
    args = sys.argv[1:]
    requests = args[:1] == ["--requests"]
    if requests:
        args = args[1:]
    port = int(args[0])
    texts = args[1:] or (line.rstrip("\n") for line in sys.stdin if requests and line.strip())
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        reader = conn.makefile("rb")
        for number, text in zip(itertools.count(1), texts):
            data = request(text, number) if requests else message(text)
            try:
                conn.sendall(data + b"\n")
                line = reader.readline()
            except (BrokenPipeError, ConnectionResetError):
                line = b""
            print(line.decode().rstrip("\n") if line else "<closed>", flush=True)


if __name__ == "__main__":
    main()
