#!/usr/bin/env python3
"""Plant a fault, run the test that should catch it, put the code back.

    scripts/plant.py FILE OLD NEW TEST [--lib]

Replaces the first OLD in FILE by NEW, runs `cargo test --test all TEST`
(or `cargo test --lib TEST` with --lib), restores FILE whatever happens,
and exits 0 only when the test FAILED with the fault in place: a test that
passes with its fault planted cannot fail for it. Prints the test's verdict
lines. Used for every check added (see the issues' closing notes).
"""
import pathlib
import subprocess
import sys


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--lib"]
    lib = "--lib" in sys.argv[1:]
    if len(args) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path, old, new, test = args
    root = pathlib.Path(__file__).resolve().parent.parent
    file = root / path
    original = file.read_bytes()
    text = original.decode()
    if old not in text:
        print(f"plant.py: the text to replace is not in {path}", file=sys.stderr)
        return 2
    file.write_text(text.replace(old, new, 1))
    try:
        target = ["--lib"] if lib else ["--test", "all"]
        run = subprocess.run(["cargo", "test", *target, test], cwd=root, capture_output=True, text=True)
    finally:
        file.write_bytes(original)
    lines = [l for l in (run.stdout + run.stderr).splitlines()
             if l.startswith("test ") or "panicked" in l or l.startswith("error")]
    print("\n".join(lines[-10:]))
    if run.returncode == 0:
        print(f"plant.py: {test} PASSED with the fault planted: it cannot catch it", file=sys.stderr)
        return 1
    print(f"plant.py: {test} failed with the fault planted, as it should")
    return 0


if __name__ == "__main__":
    sys.exit(main())
