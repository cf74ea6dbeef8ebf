"""The delivery checker: a history in, anomalies and a verdict out (docs/history.md).

rules.py is the pure-Python reference; spark.py runs the same rules as Spark jobs (the rules in
spark_rules.py, the history's files read as rows in spark_load.py, the session in
spark_session.py: these four are the only pyspark importers), with sql.py's text and cluster.py's
settings; result.py is what both produce; report.py and svg.py present it (report_sections.py:
the run's seed, options and replay command from manifest.py's run manifest, and the nemesis'
faults that nemesis_ops.py pairs with their heals; plots.py and timeline.py: the charts' data
from Spark or plain Python); engine.py chooses the engine (python_engine.py or Spark) and is the
one place the Spark engine is loaded; command.py is `kafka-harness check`; synth.py writes
synthetic histories with planted anomalies for tests and benchmarks.
"""
