package harness.checker.jvm;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.StructType;

/**
 * The rows between a first pass and the second one that walks them re-sorted: either a row the
 * second pass walks, in its own few columns, or a result of the first pass carried whole in
 * column RESULT (null on the walked rows) and passed through.
 *
 * <p>Why: results are few and wide (every rule's columns), walked rows many and narrow. Sorted
 * in one shape, every walked row carried a null for each result column, and a null costs a
 * sorted row as many bytes as a value; a null struct costs it one column's.
 */
final class Carried {
    static final int RESULT = 0;

    private Carried() {}

    /** The carried rows' schema: `results` as one struct column, then the walked rows'
     * columns, as (name, type) pairs. */
    static StructType schema(StructType results, Object[][] walked) {
        Object[][] columns = new Object[walked.length + 1][];
        columns[RESULT] = new Object[] {"result", results};
        System.arraycopy(walked, 0, columns, RESULT + 1, walked.length);
        return Results.struct(columns);
    }

    /** `result`, carried in a row `width` columns wide. */
    static GenericInternalRow result(InternalRow result, int width) {
        GenericInternalRow out = new GenericInternalRow(width);
        out.update(RESULT, result);
        return out;
    }

    static boolean isResult(InternalRow row) {
        return !row.isNullAt(RESULT);
    }

    /** The result a carried row holds, copied out of the sorter's buffer. */
    static InternalRow result(InternalRow row, StructType results) {
        return row.getStruct(RESULT, results.size()).copy();
    }
}
