package harness.checker.jvm;

import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.NoSuchElementException;
import org.apache.spark.sql.catalyst.InternalRow;

/**
 * A pass over one partition's rows as an iterator of what it emits: it reads input only when
 * nothing is waiting, so a partition of any size streams through with the pass's state (one
 * t/p's) and a few output rows in memory.
 */
abstract class Walker implements Iterator<InternalRow> {
    private final Iterator<InternalRow> input;
    private final ArrayDeque<InternalRow> out = new ArrayDeque<>();
    private boolean ended;

    Walker(Iterator<InternalRow> input) {
        this.input = input;
    }

    /** Take one input row (Spark reuses its object: copy what is kept). */
    abstract void accept(InternalRow row);

    /** The input has ended: emit what the last state holds. */
    abstract void end();

    final void emit(InternalRow row) {
        out.add(row);
    }

    @Override
    public final boolean hasNext() {
        while (out.isEmpty() && !ended) {
            if (input.hasNext()) {
                accept(input.next());
            } else {
                ended = true;
                end();
            }
        }
        return !out.isEmpty();
    }

    @Override
    public final InternalRow next() {
        if (!hasNext()) {
            throw new NoSuchElementException();
        }
        return out.poll();
    }
}
