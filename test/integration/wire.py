#!/usr/bin/env python3
"""Speaks the controller's wire protocol (v2) by hand, for tests of bad input.

wire.py PORT MESSAGE...: one connection to 127.0.0.1:PORT; each MESSAGE is
sent as one line and the reply line is printed ("<closed>" if the controller
closed the connection instead). A MESSAGE is sent as it is, except:

  @hello        opens a session: a fresh nonce, a munge credential restricted
                to uid 0 carrying its hash (`munge -S $AUTO_RESUME_MUNGE_SOCKET`);
                the controller's credential is checked (from uid 0, answering
                this hello) and "session <id> uid <uid>" printed. With
                $WIRE_SAVE set, the hello line is also written to that file.
  @req:BODY     BODY (a request's JSON text) signed for the session's next
                sequence number; the reply's body is printed once its MAC
                and sequence number are checked, else the reply line as it is.
  @replay       the last @req line again, as it was.
  @tamper:A:B   the last @req line with its first A replaced by B.
  @big:N        N bytes of 'x'.

wire.py --requests PORT [REQUEST...]: a session (as @hello), then each
REQUEST, "OP JSON-OBJECT" (the op's own fields), sent as a whole signed
request of that op (as @req:, its id numbered here); one reply per line.
Without REQUEST arguments, one REQUEST per line of stdin. This is the one
place that knows how a request is framed and signed.
"""
import itertools
import hashlib
import hmac
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile

TAG = "slurm-auto-resume/2"
SOCKET = os.environ.get("AUTO_RESUME_MUNGE_SOCKET", "")


def munge(payload, restrict_uid):
    args = ["munge", "-s", payload, "-u", str(restrict_uid)] + (["-S", SOCKET] if SOCKET else [])
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()


def unmunge(cred):
    """The credential's uid and payload, or an exception saying why not."""
    with tempfile.TemporaryDirectory() as tmp:
        meta, payload = os.path.join(tmp, "meta"), os.path.join(tmp, "payload")
        args = ["unmunge", "-N", "-k", "UID", "-m", meta, "-o", payload]
        subprocess.run(args + (["-S", SOCKET] if SOCKET else []), input=cred, check=True,
                       capture_output=True, text=True)
        with open(meta) as m, open(payload) as p:
            return int(m.read().split()[-1]), p.read()


class Session:
    def __init__(self, conn, reader):
        self.conn, self.reader = conn, reader
        self.key = self.id = None
        self.seq = 0
        self.last = None

    def exchange(self, data):
        try:
            self.conn.sendall(data + b"\n")
            line = self.reader.readline()
        except (BrokenPipeError, ConnectionResetError):
            line = b""
        return line.decode().rstrip("\n") if line else None

    def mac(self, direction, seq, body):
        data = f"{TAG} {direction} {self.id} {seq}\n".encode() + body.encode()
        return hmac.new(self.key, data, hashlib.sha256).hexdigest()

    def hello(self):
        body = json.dumps({"nonce": secrets.token_hex(32)})
        digest = hashlib.sha256(body.encode()).hexdigest()
        line = json.dumps({"v": 2, "hello": body, "cred": munge(f"{TAG} hello {digest}", 0)})
        if os.environ.get("WIRE_SAVE"):
            with open(os.environ["WIRE_SAVE"], "w") as saved:
                saved.write(line)
        reply = self.exchange(line.encode())
        if reply is None or "cred" not in reply:
            return reply
        answer = json.loads(reply)
        uid, payload = unmunge(answer["cred"])
        prefix = f"{TAG} session {answer['session']} {digest} "
        if uid != 0 or not payload.startswith(prefix):
            return f"<not the controller: uid {uid}>"
        self.id, self.key = answer["session"], bytes.fromhex(payload[len(prefix):])
        return f"session {self.id} uid {uid}"

    def request(self, body):
        self.seq += 1
        self.last = json.dumps({"v": 2, "seq": self.seq, "body": body,
                                "mac": self.mac("request", self.seq, body)})
        return self.send_sealed(self.last)

    def send_sealed(self, line):
        reply = self.exchange(line.encode())
        if reply is None:
            return None
        try:
            answer = json.loads(reply)
            ok = answer["mac"] == self.mac("reply", answer["seq"], answer["body"])
        except (ValueError, KeyError, TypeError):
            return reply
        return answer["body"] if ok and answer["seq"] == self.seq else reply


def requests_main(port, texts):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        session = Session(conn, conn.makefile("rb"))
        opened = session.hello()
        if session.key is None:
            print("<closed>" if opened is None else opened, flush=True)
            return
        for number, text in zip(itertools.count(1), texts):
            op, _, fields = text.partition(" ")
            body = json.loads(fields) if fields.strip() else {}
            reply = session.request(json.dumps({"id": number, "op": op, **body}))
            print("<closed>" if reply is None else reply, flush=True)


def main():
    if sys.argv[1:2] == ["--requests"]:
        texts = sys.argv[3:] or [line.rstrip("\n") for line in sys.stdin if line.strip()]
        requests_main(int(sys.argv[2]), texts)
        return
    port = int(sys.argv[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        session = Session(conn, conn.makefile("rb"))
        for message in sys.argv[2:]:
            if message == "@hello":
                reply = session.hello()
            elif message.startswith("@req:"):
                reply = session.request(message[5:])
            elif message == "@replay":
                reply = session.send_sealed(session.last)
            elif message.startswith("@tamper:"):
                old, new = message[8:].split(":", 1)
                reply = session.send_sealed(session.last.replace(old, new, 1))
            elif message.startswith("@big:"):
                reply = session.exchange(b"x" * int(message[5:]))
            else:
                reply = session.exchange(message.encode())
            print("<closed>" if reply is None else reply, flush=True)


if __name__ == "__main__":
    main()
