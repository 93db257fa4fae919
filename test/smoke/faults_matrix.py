#!/usr/bin/env python3
"""docs/faults.md, the fault matrix, stays true to the suite: every unit test
it names (unit "NAME") is one the unit test binary has, every integration
test (`integration.NAME`) is one test/integration/CMakeLists.txt declares,
every row names at least one test, and there are at least 30 rows.

    faults_matrix.py MATRIX UNIT_TESTS INTEGRATION_CMAKELISTS
"""
import re
import subprocess
import sys


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def main(matrix, unit_tests, integration_list):
    try:
        with open(matrix, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail(f"cannot read {matrix}: {e.strerror}")
    # Catch2 exits with the number of tests it listed: the listing is what counts.
    listing = subprocess.run([unit_tests, "--list-test-names-only"], stdout=subprocess.PIPE,
                             text=True, check=False).stdout
    known_units = {line.rstrip() for line in listing.splitlines() if line.strip()}
    if not known_units:
        fail(f"{unit_tests} lists no tests")
    # The names in `set(integration_tests ...)`, which may span lines.
    with open(integration_list, encoding="utf-8") as f:
        declared = re.search(r"^set\(integration_tests([^)]*)\)", f.read(), re.M)
    known_integration = set(declared.group(1).split()) if declared else set()
    if not known_integration:
        fail(f"no integration tests found in {integration_list}")

    rows = missing = 0
    for row in lines:
        numbered = re.match(r"^\| *([0-9]+) *\|", row)
        if not numbered:
            continue
        number = numbered.group(1)
        rows += 1
        shown = row.split("|")[-2]
        named = 0
        for name in re.findall(r'unit "([^"]+)"', shown):
            named += 1
            if name not in known_units:
                print(f'row {number}: no unit test named "{name}"', file=sys.stderr)
                missing += 1
        for name in re.findall(r"`integration\.([a-z_]+)`", shown):
            named += 1
            if name not in known_integration:
                print(f"row {number}: no integration test named integration.{name}",
                      file=sys.stderr)
                missing += 1
        if named == 0:
            print(f"row {number} names no test", file=sys.stderr)
            missing += 1
    if missing:
        fail(f"{missing} test names in {matrix} match no test")
    if rows < 30:
        fail(f"{matrix} has {rows} rows, fewer than 30")
    print(f"fault matrix: {rows} rows, each naming tests the suite has")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        fail("usage: faults_matrix.py MATRIX UNIT_TESTS INTEGRATION_CMAKELISTS")
    main(*sys.argv[1:])
