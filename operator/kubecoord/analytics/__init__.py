"""The PySpark pipeline over coordination event logs, and its report.

What belongs here: reading event logs (reading), one module per metric (leadership,
membership, kv), gathering violations (violations), writing tables and summary
(output), the HTML report (report) and the ``kubecoord analyze`` command (cli). The
synthetic history generator and the Spark standalone starter are test tooling: they
live in kubecoord-testkit (kubecoord_testkit.history_generator, .servers.spark).

pyspark is imported only inside this package (an import-linter contract), and the
command modules import it lazily inside run(), so ``kubecoord --help`` does not start
a JVM. matplotlib is imported only by report. Nothing else in the library imports this
package (the testkit's soak and generator do).
"""
