"""``python -m tools.oracle REQUEST.json|-``: the oracle's response JSON on stdout."""

import json
import sys

from .run import Unsupported, oracle_estimate


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tools.oracle REQUEST.json|-", file=sys.stderr)
        return 2
    text = sys.stdin.read() if argv[0] == "-" else open(argv[0], encoding="utf-8").read()
    try:
        out = oracle_estimate(json.loads(text))
    except Unsupported as exc:
        print(json.dumps({"error": "unsupported", "detail": str(exc)}))
        return 3
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
