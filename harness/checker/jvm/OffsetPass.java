package harness.checker.jvm;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The first pass over the observed rows (spark_rules.groupings' by-t/p rows), each partition
 * sorted by topic, partition and offset: the rules that read a t/p in offset order.
 *
 * <p>Per observed offset (the reads and known sends there): whether two values were observed
 * (inconsistent_offset), and each group whose counting polls read it in two operations
 * (redelivery). Per t/p: the highest offset a counting poll read, and the classic protocol's
 * group exclusivity (each process's reads per group and generation span [first, last]; two
 * spans interleave). And every row but a known send, passed on to the second pass with its
 * offset's rank among the t/p's observed offsets and among those holding a committed value,
 * which is all poll_skip needs to count the offsets a pair of reads skipped.
 */
final class OffsetPass implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
    private static final long serialVersionUID = 1L;
    static final String[] COLUMNS = {
        "topic", "partition", "offset", "process", "seq", "op", "v0", "v1", "group",
        "generation", "time_ns", "read", "known", "assigned", "lost", "consumer_protocol",
        "counts", "rc", "vcommitted",
    };
    private static final int TOPIC = 0, PARTITION = 1, OFFSET = 2, PROCESS = 3, SEQ = 4, OP = 5,
            V0 = 6, V1 = 7, GROUP = 8, GENERATION = 9, TIME_NS = 10, READ = 11, KNOWN = 12,
            ASSIGNED = 13, LOST = 14, CONSUMER_PROTOCOL = 15, COUNTS = 16, RC = 17,
            VCOMMITTED = 18;

    private final int[] at;
    private final int examples;

    OffsetPass(StructType schema, int examples) {
        this.at = Results.indices(schema, COLUMNS);
        this.examples = examples;
    }

    @Override
    public Iterator<InternalRow> call(Iterator<InternalRow> rows) {
        return new Pass(rows);
    }

    /** A group's counting reads of one offset: the lowest and highest op, how many. */
    private static final class Reads {
        long low = Long.MAX_VALUE, high = Long.MIN_VALUE, count;
    }

    private final class Pass extends Walker {
        // The t/p being walked and what it has shown so far.
        private final TopicPartition tp = new TopicPartition();
        private boolean observed;
        private long rank, crank, highest;
        private boolean anyCounted;
        private final Map<List<Object>, Map<Long, Span>> spans = new HashMap<>();
        // The offset being walked: its observed rows' aggregates, and its rows to pass on.
        private boolean inOffset;
        private long offset;
        private boolean seen, several, counted, committed;
        private long v0Low, v0High, v1Low, v1High;
        private final Map<UTF8String, Reads> reads = new HashMap<>();
        private final List<GenericInternalRow> waiting = new ArrayList<>();

        Pass(Iterator<InternalRow> input) {
            super(input);
        }

        private boolean flag(InternalRow row, int column) {
            int i = at[column];
            return !row.isNullAt(i) && row.getBoolean(i);
        }

        private Long longOf(InternalRow row, int column) {
            int i = at[column];
            return row.isNullAt(i) ? null : row.getLong(i);
        }

        @Override
        void accept(InternalRow row) {
            if (tp.differs(row, at[TOPIC], at[PARTITION])) {
                if (tp.started()) {
                    endPartition();
                }
                tp.moveTo(row, at[TOPIC], at[PARTITION]);
            }
            boolean known = flag(row, KNOWN), read = flag(row, READ);
            if (row.isNullAt(at[OFFSET])) {
                if (!known) {
                    emit(walked(row, read, null, 0, 0, false));
                }
                return;
            }
            long o = row.getLong(at[OFFSET]);
            if (!inOffset || o != offset) {
                endOffset();
                inOffset = true;
                offset = o;
            }
            if (read || known) {
                observe(row, read);
            }
            if (!known) {
                waiting.add(walked(row, read, o, 0, 0, false));
            }
        }

        private void observe(InternalRow row, boolean read) {
            long v0 = row.getLong(at[V0]), v1 = row.getLong(at[V1]);
            if (!seen) {
                seen = true;
                v0Low = v0High = v0;
                v1Low = v1High = v1;
            } else {
                several |= v0 != v0Low || v0 != v0High || v1 != v1Low || v1 != v1High;
                v0Low = Math.min(v0Low, v0);
                v0High = Math.max(v0High, v0);
                v1Low = Math.min(v1Low, v1);
                v1High = Math.max(v1High, v1);
            }
            committed |= flag(row, VCOMMITTED);
            if (!read) {
                return;
            }
            boolean counts = flag(row, COUNTS);
            counted |= counts;
            if (row.isNullAt(at[GROUP])) {
                return;
            }
            UTF8String group = row.getUTF8String(at[GROUP]);
            if (counts) {
                Reads r = reads.get(group);
                if (r == null) {
                    r = new Reads();
                    reads.put(group.copy(), r);
                }
                long op = row.getLong(at[OP]);
                r.low = Math.min(r.low, op);
                r.high = Math.max(r.high, op);
                r.count++;
            }
            int generation = row.isNullAt(at[GENERATION]) ? -1 : row.getInt(at[GENERATION]);
            if (generation >= 0 && !flag(row, CONSUMER_PROTOCOL)) {
                long process = row.getLong(at[PROCESS]), seq = row.getLong(at[SEQ]);
                long time = row.getLong(at[TIME_NS]);
                // Looked up by the row's own bytes; a key is copied only when it is new.
                Map<Long, Span> byProcess = spans.get(List.of(group, generation));
                if (byProcess == null) {
                    byProcess = new HashMap<>();
                    spans.put(List.of(group.copy(), generation), byProcess);
                }
                Span span = byProcess.get(process);
                if (span == null) {
                    byProcess.put(process, new Span(process, seq, time));
                } else {
                    span.widen(seq, time);
                }
            }
        }

        /** A row for the second pass (Results.WALKED): where it is, who read what, and its
         * flags; its group only where the second pass reads it (a consumer-protocol read). */
        private GenericInternalRow walked(InternalRow row, boolean read, Long o, long r, long c,
                                          boolean committedHere) {
            GenericInternalRow out = new GenericInternalRow(Results.W_WIDTH);
            out.update(Results.W_TOPIC, tp.topic());
            out.update(Results.W_PARTITION, tp.partition());
            out.update(Results.W_OFFSET, o);
            out.update(Results.W_PROCESS, longOf(row, PROCESS));
            out.update(Results.W_SEQ, longOf(row, SEQ));
            boolean consumerProtocol = flag(row, CONSUMER_PROTOCOL);
            if (read && consumerProtocol && !row.isNullAt(at[GROUP])) {
                out.update(Results.W_GROUP, row.getUTF8String(at[GROUP]).copy());
            }
            out.update(Results.W_TIME_NS, longOf(row, TIME_NS));
            out.update(Results.W_RANK, r);
            out.update(Results.W_CRANK, c);
            int flags = (read ? Results.READ : 0) | (flag(row, RC) ? Results.RC : 0)
                    | (committedHere ? Results.COMMITTED_HERE : 0)
                    | (flag(row, ASSIGNED) ? Results.ASSIGNED : 0)
                    | (flag(row, LOST) ? Results.LOST : 0)
                    | (consumerProtocol ? Results.CONSUMER_PROTOCOL : 0);
            out.update(Results.W_FLAGS, flags);
            return out;
        }

        private void endOffset() {
            if (!inOffset) {
                return;
            }
            inOffset = false;
            if (seen) {
                observed = true;
                rank++;
                crank += committed ? 1 : 0;
                if (counted) {
                    highest = anyCounted ? Math.max(highest, offset) : offset;
                    anyCounted = true;
                }
                if (several) {
                    GenericInternalRow out = result(Results.INCONSISTENT);
                    out.update(Results.OFFSET, offset);
                    emitResult(out);
                }
                for (Map.Entry<UTF8String, Reads> e : reads.entrySet()) {
                    Reads r = e.getValue();
                    if (r.low != r.high) {
                        GenericInternalRow out = result(Results.REDELIVERY);
                        out.update(Results.OFFSET, offset);
                        out.update(Results.GROUP, e.getKey());
                        out.update(Results.READS, r.count);
                        emitResult(out);
                    }
                }
            }
            for (GenericInternalRow row : waiting) {
                row.update(Results.W_RANK, rank);
                row.update(Results.W_CRANK, crank);
                if (seen && committed) {
                    int flags = row.getInt(Results.W_FLAGS) | Results.COMMITTED_HERE;
                    row.update(Results.W_FLAGS, flags);
                }
                emit(row);
            }
            waiting.clear();
            reads.clear();
            seen = several = counted = committed = false;
        }

        /** A result, carried past the second pass's sort (Carried). */
        private void emitResult(GenericInternalRow result) {
            emit(Carried.result(result, Results.W_WIDTH));
        }

        private GenericInternalRow result(String rule) {
            return Results.result(rule, tp.topic(), tp.partition());
        }

        private void endPartition() {
            endOffset();
            if (observed) {
                GenericInternalRow out = result(Results.HIGHEST);
                out.update(Results.MAX_READ_OFFSET, anyCounted ? highest : null);
                emitResult(out);
            }
            for (Map.Entry<List<Object>, Map<Long, Span>> e : spans.entrySet()) {
                List<Span> byFirst = new ArrayList<>(e.getValue().values());
                if (!interleave(byFirst)) {
                    continue;
                }
                GenericInternalRow out = result(Results.EXCLUSIVITY);
                out.update(Results.GROUP, e.getKey().get(0));
                out.update(Results.GENERATION, e.getKey().get(1));
                List<long[]> firsts = new ArrayList<>();
                for (Span span : byFirst) {
                    firsts.add(new long[] {span.process, span.seq});
                }
                Results.processes(out, firsts, examples);
                emitResult(out);
            }
            spans.clear();
            observed = anyCounted = false;
            rank = crank = 0;
        }

        @Override
        void end() {
            if (tp.started()) {
                endPartition();
            }
        }
    }

    /** Whether a span starts before an earlier one ends (by first; on a tie the longer first,
     * then by process: as rules._interleave). */
    static boolean interleave(List<Span> spans) {
        spans.sort((a, b) -> a.first != b.first ? Long.compare(a.first, b.first)
                : a.last != b.last ? Long.compare(b.last, a.last) : Long.compare(a.process, b.process));
        boolean any = false;
        long latest = 0;
        for (Span span : spans) {
            if (any && span.first < latest) {
                return true;
            }
            latest = any ? Math.max(latest, span.last) : span.last;
            any = true;
        }
        return false;
    }
}
