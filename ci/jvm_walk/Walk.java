package harness.bench;

import java.util.Collections;
import java.util.List;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;

/**
 * The checker benchmark's yardstick for rules written as JVM code (ci/bench_checker.py
 * --jvm-walk): a dataset's partitions, exchanged and sorted by Spark, walked once by compiled
 * code that reads every field of every row and notes where its grouping key changes. What a
 * rule computed in one pass over a grouping pays before it computes anything: Spark's own
 * internal rows, with no conversion to another format and no other process.
 */
public final class Walk {
    private static final int LONG = 0, INT = 1, STRING = 2, BOOLEAN = 3;

    private Walk() {}

    /** {rows, groups, hash}: the rows walked, how many times the first keyCount fields changed
     * from one row to the next within a partition (a partition's first row counts), and a hash
     * of every field, so that no read can be left out. */
    public static long[] walk(Dataset<Row> rows, int keyCount) {
        StructField[] fields = rows.schema().fields();
        int[] kinds = new int[fields.length];
        for (int i = 0; i < fields.length; i++) {
            kinds[i] = kind(fields[i]);
        }
        List<long[]> parts = rows.queryExecution().toRdd().toJavaRDD().mapPartitions(it -> {
            long n = 0, groups = 0, hash = 0;
            long[] previous = new long[keyCount];
            while (it.hasNext()) {
                InternalRow row = it.next();
                boolean changed = n == 0;
                long rowHash = 0;
                for (int i = 0; i < kinds.length; i++) {
                    long field;
                    if (row.isNullAt(i)) {
                        field = 7;
                    } else {
                        switch (kinds[i]) {
                            case LONG: field = row.getLong(i); break;
                            case INT: field = row.getInt(i); break;
                            case STRING: field = row.getUTF8String(i).hashCode(); break;
                            default: field = row.getBoolean(i) ? 1 : 0;
                        }
                    }
                    if (i < keyCount) {
                        changed |= previous[i] != field;
                        previous[i] = field;
                    }
                    rowHash = rowHash * 31 + field;
                }
                n++;
                groups += changed ? 1 : 0;
                hash ^= rowHash;
            }
            return Collections.singletonList(new long[] {n, groups, hash}).iterator();
        }).collect();
        long[] total = new long[3];
        for (long[] part : parts) {
            total[0] += part[0];
            total[1] += part[1];
            total[2] ^= part[2];
        }
        return total;
    }

    private static int kind(StructField field) {
        DataType type = field.dataType();
        if (type.equals(DataTypes.LongType)) return LONG;
        if (type.equals(DataTypes.IntegerType)) return INT;
        if (type.equals(DataTypes.StringType)) return STRING;
        if (type.equals(DataTypes.BooleanType)) return BOOLEAN;
        throw new IllegalArgumentException("no walk for column " + field.name() + " of type " + type);
    }
}
