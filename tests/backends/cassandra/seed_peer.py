"""A peer that does exactly what the seed plugin (the KIP-30 Cassandra plugin) does.

    python -m tests.backends.cassandra.seed_peer HOST:PORT KEYSPACE RESOURCE OWNER LOG

Its statements, verbatim: a candidate runs ``INSERT INTO leader_election (resource, owner,
sup_data) VALUES (?, ?, ?) IF NOT EXISTS``; the leader renews every 500 ms with ``UPDATE
leader_election SET owner = ?, sup_data = ? WHERE resource = ? IF owner = ?``; everyone
polls every 500 ms. It ignores whether its writes applied, relies on the table's
``default_time_to_live = 2`` for expiry, and believes it leads while its poll shows it as
the owner. It logs that belief (JSON Lines: {"event": "acquired"|"lost", "at": wall time})
to LOG, prints "ready" after its first poll, and runs until killed.
"""

from __future__ import annotations

import json
import sys
import time

from cassandra.cluster import Cluster

PERIOD = 0.5


def main() -> None:
    host, keyspace, resource, owner, log_path = sys.argv[1:6]
    address, _, port = host.rpartition(":")
    cluster = Cluster([(address, int(port))], protocol_version=5)
    session = cluster.connect(keyspace)
    insert = session.prepare("INSERT INTO leader_election (resource, owner, sup_data) VALUES (?, ?, ?) IF NOT EXISTS")
    renew = session.prepare("UPDATE leader_election SET owner = ?, sup_data = ? WHERE resource = ? IF owner = ?")
    poll = session.prepare("SELECT owner FROM leader_election WHERE resource = ?")
    leading = False
    with open(log_path, "a") as log:
        first = True
        while True:
            try:
                if leading:
                    session.execute(renew, [owner, "seed", resource, owner])
                else:
                    session.execute(insert, [resource, owner, "seed"])
                rows = list(session.execute(poll, [resource]))
                now_leading = bool(rows) and rows[0].owner == owner
            except Exception as exc:  # the seed plugin carries on through errors
                print(f"error: {exc!r}", file=sys.stderr, flush=True)
                now_leading = leading
            if now_leading != leading:
                leading = now_leading
                log.write(json.dumps({"event": "acquired" if leading else "lost", "at": time.time()}) + "\n")
                log.flush()
            if first:
                print("ready", flush=True)
                first = False
            time.sleep(PERIOD)


if __name__ == "__main__":
    main()
