package harness.checker.jvm;

import java.util.List;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The one row shape both passes of TopicPartitionPass emit results in, the helpers that fill
 * it, and the shape of the rows the second pass walks.
 *
 * <p>A result row names its rule (an anomaly of result.ANOMALIES, or HIGHEST: a t/p's highest
 * offset a counting poll read) and fills the columns that rule reports; the Python side
 * (harness.checker.spark_jvm) selects each rule's columns from it. The first pass also emits
 * the rows the second one walks (WALKED, its results Carried past the second sort), which
 * carry a read's rank among its t/p's observed offsets and the flags the second pass needs.
 */
final class Results {
    static final String HIGHEST = "highest";
    static final String INCONSISTENT = "inconsistent_offset";
    static final String BACKWARD = "nonmonotonic_poll";
    static final String SKIP = "poll_skip";
    static final String EXCLUSIVITY = "group_exclusivity";
    static final String REDELIVERY = "redelivery";

    static final int RULE = 0, TOPIC = 1, PARTITION = 2, OFFSET = 3, PROCESS = 4, SEQ = 5,
            PREVIOUS_SEQ = 6, PREVIOUS_OFFSET = 7, OBSERVED_BETWEEN = 8, GROUP = 9,
            GENERATION = 10, PROCESS_COUNT = 11, READS = 12, MAX_READ_OFFSET = 13, SEL_ROWS = 14,
            PROCESSES = 15;
    static final int WIDTH = 16;

    /** A walked row's columns, after Carried.RESULT. */
    static final int W_TOPIC = 1, W_PARTITION = 2, W_OFFSET = 3, W_PROCESS = 4, W_SEQ = 5,
            W_GROUP = 6, W_TIME_NS = 7, W_RANK = 8, W_CRANK = 9, W_FLAGS = 10;
    static final int W_WIDTH = 11;

    /** The flags of a walked row. */
    static final int READ = 1, RC = 2, COMMITTED_HERE = 4, ASSIGNED = 8, LOST = 16,
            CONSUMER_PROTOCOL = 32;

    static final StructType ROW_REF = new StructType()
            .add("process", DataTypes.LongType)
            .add("seq", DataTypes.LongType);
    static final StructType SCHEMA = struct(new Object[][] {
        {"rule", DataTypes.StringType}, {"topic", DataTypes.LongType},
        {"partition", DataTypes.IntegerType}, {"offset", DataTypes.LongType},
        {"process", DataTypes.LongType}, {"seq", DataTypes.LongType},
        {"previous_seq", DataTypes.LongType}, {"previous_offset", DataTypes.LongType},
        {"observed_between", DataTypes.LongType}, {"group", DataTypes.StringType},
        {"generation", DataTypes.IntegerType}, {"process_count", DataTypes.LongType},
        {"reads", DataTypes.LongType}, {"max_read_offset", DataTypes.LongType},
        {"sel_rows", DataTypes.createArrayType(ROW_REF)},
        {"processes", DataTypes.createArrayType(DataTypes.LongType)},
    });
    /** The rows the second pass walks, sorted by t/p, process and seq (the results first). */
    static final StructType WALKED = Carried.schema(SCHEMA, new Object[][] {
        {"topic", DataTypes.LongType}, {"partition", DataTypes.IntegerType},
        {"offset", DataTypes.LongType}, {"process", DataTypes.LongType},
        {"seq", DataTypes.LongType}, {"group", DataTypes.StringType},
        {"time_ns", DataTypes.LongType}, {"rank", DataTypes.LongType},
        {"crank", DataTypes.LongType}, {"flags", DataTypes.IntegerType},
    });

    private Results() {}

    /** A schema of (name, type) pairs, every column nullable. */
    static StructType struct(Object[][] columns) {
        StructField[] fields = new StructField[columns.length];
        for (int i = 0; i < columns.length; i++) {
            fields[i] = DataTypes.createStructField((String) columns[i][0], (DataType) columns[i][1], true);
        }
        return new StructType(fields);
    }

    /** A result row of `rule` at t/p, every other column null. */
    static GenericInternalRow result(String rule, Long topic, Integer partition) {
        GenericInternalRow row = new GenericInternalRow(WIDTH);
        row.update(RULE, UTF8String.fromString(rule));
        row.update(TOPIC, topic);
        row.update(PARTITION, partition);
        return row;
    }

    /** A group's example: how many processes, and the first `limit` of them by process
     * (result.ROWS_PER_EXAMPLE) with the row that names each. `firsts` holds one {process,
     * seq} pair per process. */
    static void processes(GenericInternalRow row, List<long[]> firsts, int limit) {
        firsts.sort((a, b) -> Long.compare(a[0], b[0]));
        int shown = Math.min(limit, firsts.size());
        Object[] refs = new Object[shown];
        long[] processes = new long[shown];
        for (int i = 0; i < shown; i++) {
            long[] first = firsts.get(i);
            refs[i] = new GenericInternalRow(new Object[] {first[0], first[1]});
            processes[i] = first[0];
        }
        row.update(PROCESS_COUNT, (long) firsts.size());
        row.update(SEL_ROWS, new GenericArrayData(refs));
        row.update(PROCESSES, new GenericArrayData(processes));
    }

    /** The rows an example of a pair of reads names: (process, previous seq), (process, seq). */
    static GenericArrayData pair(long process, long previousSeq, long seq) {
        return new GenericArrayData(new Object[] {
            new GenericInternalRow(new Object[] {process, previousSeq}),
            new GenericInternalRow(new Object[] {process, seq}),
        });
    }

    /** Where each of `names` is in `schema`, failing with the column's name if it is not. */
    static int[] indices(StructType schema, String... names) {
        int[] found = new int[names.length];
        for (int i = 0; i < names.length; i++) {
            found[i] = schema.fieldIndex(names[i]);
        }
        return found;
    }
}
