package harness.checker.jvm;

import org.apache.spark.sql.catalyst.InternalRow;

/**
 * The t/p a pass is walking, as the rows name it (a null topic or partition is a key of its
 * own, as in SQL's grouping): a pass asks whether a row is of another one, ends the one it
 * walked if so, then moves on.
 */
final class TopicPartition {
    private boolean started, topicNull, partitionNull;
    private long topic;
    private int partition;

    /** Whether a t/p was walked before this row. */
    boolean started() {
        return started;
    }

    /** Whether `row`'s t/p (topic a bigint, partition an int, at those columns) is another
     * than the one walked (a walk's first row's always is). */
    boolean differs(InternalRow row, int topicAt, int partitionAt) {
        boolean tNull = row.isNullAt(topicAt), pNull = row.isNullAt(partitionAt);
        return !started || tNull != topicNull || pNull != partitionNull
                || (!tNull && row.getLong(topicAt) != topic)
                || (!pNull && row.getInt(partitionAt) != partition);
    }

    /** Walk `row`'s t/p from now on. */
    void moveTo(InternalRow row, int topicAt, int partitionAt) {
        started = true;
        topicNull = row.isNullAt(topicAt);
        partitionNull = row.isNullAt(partitionAt);
        topic = topicNull ? 0 : row.getLong(topicAt);
        partition = partitionNull ? 0 : row.getInt(partitionAt);
    }

    Long topic() {
        return topicNull ? null : topic;
    }

    Integer partition() {
        return partitionNull ? null : partition;
    }
}
