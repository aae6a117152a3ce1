"""A process that increments one counter key N times by compare-and-set.

    python -m tests.backends.cassandra.increment_process URL STORE KEY N

Prints "done CONFLICTS" when finished.
"""

from __future__ import annotations

import sys

import kubecoord

from .timings import TIMINGS


def main() -> None:
    url, store, key, count = sys.argv[1:5]
    conflicts = 0
    with kubecoord.connect(url, **TIMINGS) as coord:
        kv = coord.storage(store)
        for _ in range(int(count)):
            while True:
                current = kv.fetch_versioned(key).result()
                assert current is not None
                try:
                    kv.update(key, str(int(current.value) + 1), expected_version=current.version)
                    break
                except kubecoord.VersionConflictError:
                    conflicts += 1
    print(f"done {conflicts}", flush=True)


if __name__ == "__main__":
    main()
