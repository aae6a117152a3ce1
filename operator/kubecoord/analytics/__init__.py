"""The PySpark pipeline over coordination event logs, and its report.

What belongs here: reading event logs (reading), one module per metric (leadership,
membership, kv), gathering violations (violations), writing tables and summary
(output), the HTML report (report), the synthetic history generator (generate) and the
``kubecoord analyze`` / ``kubecoord generate-history`` commands (cli, generate).

pyspark is imported only inside this package (an import-linter contract), and the
command modules import it lazily inside run(), so ``kubecoord --help`` does not start
a JVM. matplotlib is imported only by report. Nothing outside kubecoord.analytics
imports this package.
"""
