"""The delivery checker: a history in, anomalies and a verdict out (docs/history.md).

rules.py is the pure-Python reference; spark.py (the only pyspark importer) runs the same rules
as Spark jobs, with sql.py's text and cluster.py's settings; result.py is what both produce;
report.py and svg.py present it; command.py is `kafka-harness check`; synth.py writes synthetic
histories with planted anomalies for tests and benchmarks.
"""
