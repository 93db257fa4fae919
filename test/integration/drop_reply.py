#!/usr/bin/env python3
"""A TCP proxy in front of the controller that loses one reply.

drop_reply.py LISTEN_PORT UPSTREAM_PORT: listens on 127.0.0.1:LISTEN_PORT
and forwards every connection to 127.0.0.1:UPSTREAM_PORT, line by line,
except the reply to the first request that registers a step: that one is
read from the controller (which did register the step) and not passed on,
and the client's connection is left open, so the client times out. Prints
"listening", then one line per register request and what became of its
reply.
"""
import json
import socket
import sys
import threading

def body_of(line):
    """A signed line's body (protocol 2 carries it as a string), or {}."""
    try:
        body = json.loads(line).get("body")
        return json.loads(body) if isinstance(body, str) else {}
    except (ValueError, AttributeError):
        return {}


lock = threading.Lock()
dropped = False


def say(text):
    with lock:
        print(text, flush=True)


def serve(client, upstream_port):
    global dropped
    upstream = socket.create_connection(("127.0.0.1", upstream_port))
    pending = []  # per request line sent upstream: drop its reply?
    cond = threading.Condition()

    def to_upstream():
        global dropped
        for line in client.makefile("rb"):
            drop = False
            if body_of(line).get("op") == "register":
                with lock:
                    drop, dropped = not dropped, True
                say("register request" + (" (its reply will be dropped)" if drop else ""))
            with cond:
                pending.append(drop)
                cond.notify()
            upstream.sendall(line)
        upstream.shutdown(socket.SHUT_WR)

    threading.Thread(target=to_upstream, daemon=True).start()
    for line in upstream.makefile("rb"):
        with cond:
            cond.wait_for(lambda: pending)
            drop = pending.pop(0)
        if drop:
            say("dropped the reply to register: " + json.dumps(body_of(line)))
            continue
        if "duplicate" in body_of(line).get("result", {}):
            say("forwarded the reply to register: " + json.dumps(body_of(line)))
        client.sendall(line)
    client.close()


def main():
    listen_port, upstream_port = int(sys.argv[1]), int(sys.argv[2])
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", listen_port))
    server.listen(16)
    say("listening")
    while True:
        client, _ = server.accept()
        threading.Thread(target=serve, args=(client, upstream_port), daemon=True).start()


if __name__ == "__main__":
    main()
