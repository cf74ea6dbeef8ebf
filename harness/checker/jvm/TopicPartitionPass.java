package harness.checker.jvm;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.SparkSession;

/**
 * The rules of the by-topic-partition grouping as two compiled passes, called by
 * harness.checker.spark_jvm: what the Spark engine computes with SQL windows, joins and
 * aggregations (spark_rules), in one walk of the grouping in offset order and one in read
 * order, with each t/p's state in memory and the rows streamed.
 *
 * <p>Why: those SQL rules cost five times a sorted walk of the same rows (docs/benchmarks.md,
 * "The compiled passes"). Spark still does the exchange and both sorts, which spill; the
 * passes only read rows in the order given.
 */
public final class TopicPartitionPass {
    private TopicPartitionPass() {}

    /**
     * Every result row of the by-t/p rules (Results.SCHEMA; rule names the rule) from
     * `observed`: the grouping's rows, each t/p in one partition, sorted by topic, partition
     * and offset. `examples` is how many rows an example names at most.
     */
    public static Dataset<Row> results(Dataset<Row> observed, int examples) {
        org.apache.spark.sql.classic.Dataset<Row> rows = (org.apache.spark.sql.classic.Dataset<Row>) observed;
        SparkSession session = rows.sparkSession();
        JavaRDD<InternalRow> first = rows.queryExecution().toRdd().toJavaRDD()
                .mapPartitions(new OffsetPass(rows.schema(), examples), true);
        org.apache.spark.sql.classic.Dataset<Row> walked = session
                .internalCreateDataFrame(first.rdd(), Results.WALKED, false)
                .sortWithinPartitions("topic", "partition", "process", "seq");
        JavaRDD<InternalRow> second = walked.queryExecution().toRdd().toJavaRDD()
                .mapPartitions(new RunPass(examples), true);
        return session.internalCreateDataFrame(second.rdd(), Results.SCHEMA, false);
    }
}
