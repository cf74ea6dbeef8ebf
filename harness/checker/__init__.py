"""The delivery checker: a history in, anomalies and a verdict out (docs/history.md).

rules.py is the pure-Python reference; spark.py (the only pyspark importer) runs the same rules
as Spark jobs, with sql.py's text and cluster.py's settings; result.py is what both produce;
report.py and svg.py present it (report_sections.py: the run's seed, options and replay command
from manifest.py's run manifest, and the nemesis' faults that nemesis_ops.py pairs with their
heals; plots.py and timeline.py: the charts' data from Spark or plain Python); command.py is
`kafka-harness check`; synth.py writes synthetic histories with planted anomalies for tests and
benchmarks.
"""
