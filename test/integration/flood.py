#!/usr/bin/env python3
"""A flood of idle connections to the controller, for tests of its limits.

flood.py [--source ADDR] PORT COUNT STOPFILE: opens COUNT connections to
127.0.0.1:PORT from ADDR (default 127.0.0.2) that send nothing, prints
"open N" once they are, then opens a new one for each the controller closes,
until STOPFILE exists; then prints "closed N" (how many the controller
closed) and exits.

flood.py [--source ADDR] --deadline PORT COUNT LIMIT: opens COUNT idle
connections and prints how many the controller closed within LIMIT seconds
("closed N").
"""
import argparse
import os
import resource
import selectors
import socket
import sys
import time


def raise_descriptor_limit(count):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, count + 256) if hard != resource.RLIM_INFINITY else count + 256
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


SOURCE = "127.0.0.2"


def connect(port, selector):
    conn = socket.socket()
    conn.bind((SOURCE, 0))
    conn.settimeout(10)
    try:
        conn.connect(("127.0.0.1", port))
    except OSError:
        conn.close()
        return False
    conn.setblocking(False)
    selector.register(conn, selectors.EVENT_READ)
    return True


def closed_ones(selector, timeout):
    """The connections the controller closed, unregistered."""
    gone = []
    for key, _ in selector.select(timeout):
        try:
            data = key.fileobj.recv(4096)
        except (ConnectionResetError, BlockingIOError):
            data = b""
        if not data:
            selector.unregister(key.fileobj)
            key.fileobj.close()
            gone.append(key)
    return gone


def flood(port, count, stopfile):
    selector = selectors.DefaultSelector()
    opened = sum(connect(port, selector) for _ in range(count))
    print(f"open {opened}", flush=True)
    closed = 0
    while not os.path.exists(stopfile):
        for _ in closed_ones(selector, 0.1):
            closed += 1
            connect(port, selector)
    print(f"closed {closed}", flush=True)


def deadline(port, count, limit):
    selector = selectors.DefaultSelector()
    opened = sum(connect(port, selector) for _ in range(count))
    closed = 0
    end = time.monotonic() + limit
    while closed < opened and time.monotonic() < end:
        closed += len(closed_ones(selector, 0.1))
    print(f"closed {closed}", flush=True)


def check_source(address):
    """Exits with a message naming ADDRESS if no socket can bind it."""
    try:
        with socket.socket() as probe:
            probe.bind((address, 0))
    except OSError as error:
        sys.exit(f"flood.py: cannot bind source address '{address}': {error}")


def main():
    global SOURCE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=SOURCE, help="source address (default %(default)s)")
    parser.add_argument("--deadline", action="store_true",
                        help="count the connections closed within LIMIT seconds")
    parser.add_argument("port", type=int)
    parser.add_argument("count", type=int)
    parser.add_argument("last", metavar="STOPFILE|LIMIT")
    args = parser.parse_args()
    check_source(args.source)
    SOURCE = args.source
    raise_descriptor_limit(args.count)
    if args.deadline:
        deadline(args.port, args.count, float(args.last))
    else:
        flood(args.port, args.count, args.last)


if __name__ == "__main__":
    main()
