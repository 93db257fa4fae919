#!/usr/bin/env python3
"""scrape.py URL [METHOD]: the body of an HTTP answer on stdout (exit 0 for
200); for another status, "HTTP STATUS" on stdout and exit 3; exit 2 when
nothing answers."""
import sys
import urllib.error
import urllib.request

url = sys.argv[1]
method = sys.argv[2] if len(sys.argv) > 2 else "GET"
try:
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as answer:
        kind = answer.headers.get("Content-Type", "")
        sys.stdout.write(answer.read().decode())
        sys.stderr.write(f"Content-Type: {kind}\n")
except urllib.error.HTTPError as error:
    print(f"HTTP {error.code}")
    sys.exit(3)
except OSError as error:
    print(f"scrape.py: {url}: {error}", file=sys.stderr)
    sys.exit(2)
