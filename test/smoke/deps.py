#!/usr/bin/env python3
"""Everything a finished build used comes from scripts/bootstrap's packages.

A machine that happens to have a package (the image's, one installed by
hand) hides a missing install step: the build works here and fails on a
fresh machine. This check does not ask the machine what it has. It reads
what the build itself used:
  - every header a compile read (the compilers' dependency files, as ninja
    keeps them, or the *.d files of a make build),
  - every library and object a link read (the build's command lines, with
    -lNAME found as the compiler finds it, and the compiler's own runtime),
  - the compilers and the programs the project's own find_program calls
    found (CMakeCache.txt),
and finds the Debian package that owns each file (dpkg's file lists). Each
such package must be in scripts/bootstrap's list or in what they depend on
(apt-cache depends --recurse: Depends and Pre-Depends, every alternative),
or be Essential (on every Debian system) or what those depend on.
Files under the source or build tree are the project's own.

  deps.py SOURCE_DIR BUILD_DIR [--build-part] [--without PKG]...

--build-part checks against the first part of bootstrap's list only (what
`scripts/bootstrap --build` installs): scripts/test and scripts/demo build
while the rest is still being installed, so the plain and sanitizer builds
may use nothing else. (The fuzz build runs later: clang is in the rest.)
--without PKG checks against bootstrap's list less PKG: with a package the
build needs, the check must fail and name it (the test of this test).
Exits 0 when every file is accounted for, 1 naming each one that is not, 2
on bad usage.
"""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys


def fail_usage(message):
    print(f"deps: {message}", file=sys.stderr)
    sys.exit(2)


def run(argv):
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        fail_usage(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def inside(path, roots):
    return any(path == root or path.startswith(root + "/") for root in roots)


def headers(build):
    """Absolute paths of every file a compile read: ninja's record of the
    compilers' dependency files (ninja -t deps), or the *.d files a make
    build keeps."""
    found = set()

    def add(dep):
        if not dep.startswith("/"):
            dep = os.path.join(build, dep)
        found.add(os.path.normpath(dep))

    if os.path.isfile(os.path.join(build, "build.ninja")):
        for line in run(["ninja", "-C", build, "-t", "deps"]).splitlines():
            if line[:1].isspace() and line.strip():
                add(line.strip())
        return found
    for depfile in glob.glob(os.path.join(build, "**", "*.d"), recursive=True):
        if not os.path.isfile(depfile):
            continue
        with open(depfile, errors="replace") as f:
            text = f.read().replace("\\\n", " ")
        for line in text.splitlines():
            if ":" not in line:
                continue
            _, _, deps = line.partition(": ")
            for dep in deps.split():
                if dep.startswith("/"):
                    add(dep)
    return found


def commands(build):
    """Every command line of the build: ninja's (ninja -t commands), or a
    make build's link lines (link.txt), each split at && and ;."""
    if os.path.isfile(os.path.join(build, "build.ninja")):
        lines = run(["ninja", "-C", build, "-t", "commands"]).splitlines()
    else:
        lines = []
        for link in glob.glob(os.path.join(build, "**", "link.txt"), recursive=True):
            with open(link) as f:
                lines += f.read().splitlines()
    for line in lines:
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        command = []
        for word in words + ["&&"]:
            if word in ("&&", ";", "||"):
                if command:
                    yield command
                command = []
            else:
                command.append(word)


def compiler_file(compiler, name):
    out = run([compiler, f"-print-file-name={name}"]).strip()
    return os.path.normpath(out) if out.startswith("/") else None


def link_inputs(build):
    """Absolute paths of every library a command names, and the compilers."""
    found, compilers = set(), set()
    for words in commands(build):
        tool = words[0]
        if not tool.startswith("/"):
            continue
        found.add(tool)
        # An archiver's line (ar, ranlib) reads the build's own objects.
        if not re.fullmatch(r"(.*-)?(c\+\+|g\+\+|gcc|cc|clang|clang\+\+)(-[0-9.]+)?",
                            os.path.basename(tool)):
            continue
        compilers.add(tool)
        for word in words[1:]:
            if word.startswith("-l") and len(word) > 2:
                for suffix in (".so", ".a"):
                    path = compiler_file(tool, f"lib{word[2:]}{suffix}")
                    if path and os.path.exists(path):
                        found.add(path)
                        break
                else:
                    found.add(f"unresolved {word} ({' '.join(words[:3])} ...)")
            elif word.startswith("/") and re.search(r"\.(so(\.[0-9.]+)?|a|o)$", word):
                found.add(os.path.normpath(word))
    # What every C++ link reads without naming it.
    for tool in list(compilers):
        for name in ("libstdc++.so", "libgcc_s.so", "libc.so", "libm.so", "crt1.o"):
            path = compiler_file(tool, name)
            if path and os.path.exists(path):
                found.add(path)
    return found, compilers


def programs(source, build):
    """The compilers and what the project's own find_program calls found."""
    # Not CMAKE_LINKER, CMAKE_AR and the like: CMake finds them whether or
    # not a command runs them (with clang it finds ld.lld, and the compiler
    # links with ld); the tools the commands run are counted there.
    variables = {"CMAKE_C_COMPILER", "CMAKE_CXX_COMPILER", "CMAKE_MAKE_PROGRAM"}
    for folder, subfolders, files in os.walk(source):
        # Not build folders in the tree, nor .git.
        subfolders[:] = [d for d in subfolders if not d.startswith((".", "build"))]
        for name in files:
            if name == "CMakeLists.txt" or name.endswith(".cmake"):
                with open(os.path.join(folder, name)) as f:
                    variables.update(re.findall(r"find_program\(\s*([A-Za-z0-9_]+)", f.read()))
    found = set()
    cache = os.path.join(build, "CMakeCache.txt")
    with open(cache) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_]+):FILEPATH=(/.*)$", line.rstrip("\n"))
            if m and m.group(1) in variables and os.path.exists(m.group(2)):
                found.add(m.group(2))
    return found


def owners():
    """Every file dpkg knows, with the packages that ship it."""
    table = {}
    for listing in glob.glob("/var/lib/dpkg/info/*.list"):
        package = os.path.basename(listing)[:-len(".list")].split(":")[0]
        with open(listing, errors="replace") as f:
            for line in f:
                table.setdefault(line.rstrip("\n"), set()).add(package)
    return table


def owner_of(path, table):
    """The packages that own PATH, as named or through its links (merged /usr)."""
    candidates = [path, os.path.realpath(path)]
    for p in list(candidates):
        for a, b in (("/usr/lib/", "/lib/"), ("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/")):
            if p.startswith(a):
                candidates.append(b + p[len(a):])
            elif p.startswith(b):
                candidates.append(a + p[len(b):])
    # A file reached through a linked folder: its folder's real path.
    candidates.append(os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path)))
    for candidate in candidates:
        if candidate in table:
            return table[candidate]
    return set()


def closure(packages):
    out = run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
               "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"] + packages)
    return {line.strip() for line in out.splitlines() if line and not line[0].isspace()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("build")
    parser.add_argument("--build-part", action="store_true")
    parser.add_argument("--without", action="append", default=[], metavar="PKG")
    args = parser.parse_args()
    source, build = os.path.realpath(args.source), os.path.realpath(args.build)
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        fail_usage(f"'{args.build}' is no configured build folder (no CMakeCache.txt)")
    part = ["--build"] if args.build_part else []
    listed = run([os.path.join(source, "scripts", "bootstrap"), "--list"] + part).split()
    for package in args.without:
        if package not in listed:
            fail_usage(f"--without {package}: scripts/bootstrap does not list it")
    listed = [p for p in listed if p not in args.without]
    # Debian's Essential packages (and theirs) are on every Debian system,
    # a debootstrap root's included: the field is the archive's, not this
    # machine's choice.
    essential = [line.split()[0] for line in
                 run(["dpkg-query", "-W", "-f", "${Package} ${Essential}\n"]).splitlines()
                 if line.endswith(" yes")]
    allowed = closure(listed + essential)

    used = headers(build)
    libraries, _ = link_inputs(build)
    used |= libraries
    used |= programs(source, build)
    if not any(p.endswith(".h") or p.endswith(".hpp") or "/include/" in p for p in used):
        print(f"FAIL [deps]: no compile in {build} read a system header: is it built?",
              file=sys.stderr)
        return 1
    table = owners()
    missing = {}  # package (or a reason) -> files
    checked = 0
    for path in sorted(used):
        if path.startswith("unresolved "):
            missing.setdefault("no file", []).append(path)
            continue
        if inside(path, [source, build]) or inside(os.path.realpath(path), [source, build]):
            continue
        checked += 1
        packages = owner_of(path, table)
        if not packages:
            missing.setdefault("no Debian package", []).append(path)
        elif not packages & allowed:
            missing.setdefault(" or ".join(sorted(packages)), []).append(path)
    scope = " (its --build part)" if args.build_part else ""
    scope += f" (less {', '.join(args.without)})" if args.without else ""
    if missing:
        for package, files in sorted(missing.items()):
            shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
            print(f"FAIL [deps]: the build used {shown}, from {package}, which is neither in "
                  f"scripts/bootstrap's list{scope} nor Essential, nor among what those depend on",
                  file=sys.stderr)
        return 1
    print(f"deps: {checked} system files the build used, each from a package of scripts/bootstrap's "
          f"{len(listed)}{scope}, Debian's {len(essential)} Essential ones or what they depend on "
          f"({len(allowed)} packages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
