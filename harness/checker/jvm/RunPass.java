package harness.checker.jvm;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The second pass: OffsetPass's walked rows (Results.WALKED), each partition sorted by topic,
 * partition, process and seq (its results, Carried, sort first and pass through). The rules
 * that read a process's rows of a t/p in the order it saw them.
 *
 * <p>Consecutive reads in one run (an assign, a revoke or a failed transaction's completion
 * row ends it): one at or below the offset before it (nonmonotonic_poll), or above it with
 * observed offsets skipped (poll_skip; a pair of read_committed reads counts only offsets
 * holding a committed value). And the consumer protocol's group exclusivity: a process's
 * reads between its assign rows of a t/p are one ownership (left out if a revoke says it
 * lost the t/p in it); per group and t/p, ownerships of two processes must not interleave.
 */
final class RunPass implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
    private static final long serialVersionUID = 1L;
    private final int examples;

    RunPass(int examples) {
        this.examples = examples;
    }

    @Override
    public Iterator<InternalRow> call(Iterator<InternalRow> rows) {
        return new Pass(rows);
    }

    private final class Pass extends Walker {
        private final TopicPartition tp = new TopicPartition();
        private long process;
        // The process's run so far: its last row, and its ownerships of the t/p.
        private boolean previousRead, previousRc, previousOffsetNull = true;
        private long previousSeq, previousOffset, previousRank, previousCrank;
        private long owned;
        private final Set<Long> lost = new HashSet<>();
        private final Map<List<Object>, Span> owning = new HashMap<>();
        // Per group, the t/p's ownerships that were not lost.
        private final Map<UTF8String, List<Span>> ownerships = new HashMap<>();

        Pass(Iterator<InternalRow> input) {
            super(input);
        }

        @Override
        void accept(InternalRow row) {
            if (Carried.isResult(row)) {
                emit(Carried.result(row, Results.SCHEMA));
                return;
            }
            long proc = row.getLong(Results.W_PROCESS);
            boolean newPartition = tp.differs(row, Results.W_TOPIC, Results.W_PARTITION);
            if (tp.started() && (newPartition || proc != process)) {
                endRun();
                if (newPartition) {
                    endPartition();
                }
            }
            tp.moveTo(row, Results.W_TOPIC, Results.W_PARTITION);
            process = proc;
            int flags = row.getInt(Results.W_FLAGS);
            boolean read = (flags & Results.READ) != 0, rc = (flags & Results.RC) != 0;
            long seq = row.getLong(Results.W_SEQ);
            boolean offsetNull = row.isNullAt(Results.W_OFFSET);
            long offset = offsetNull ? 0 : row.getLong(Results.W_OFFSET);
            long rank = row.getLong(Results.W_RANK), crank = row.getLong(Results.W_CRANK);
            if (read && previousRead && !offsetNull && !previousOffsetNull) {
                pair(seq, offset, rank, crank, rc, (flags & Results.COMMITTED_HERE) != 0);
            }
            if ((flags & Results.ASSIGNED) != 0) {
                owned++;
            } else if ((flags & Results.LOST) != 0) {
                lost.add(owned);
            } else if (read && (flags & Results.CONSUMER_PROTOCOL) != 0
                    && !row.isNullAt(Results.W_GROUP)) {
                long time = row.getLong(Results.W_TIME_NS);
                UTF8String group = row.getUTF8String(Results.W_GROUP);
                Span span = owning.get(List.of(group, owned));
                if (span == null) {
                    owning.put(List.of(group.copy(), owned), new Span(proc, seq, time));
                } else {
                    span.widen(seq, time);
                }
            }
            previousRead = read;
            previousRc = rc;
            previousSeq = seq;
            previousOffsetNull = offsetNull;
            previousOffset = offset;
            previousRank = rank;
            previousCrank = crank;
        }

        private void pair(long seq, long offset, long rank, long crank, boolean rc,
                          boolean committedHere) {
            String rule;
            long between = 0;
            if (offset <= previousOffset) {
                rule = Results.BACKWARD;
            } else {
                between = rc && previousRc ? crank - (committedHere ? 1 : 0) - previousCrank
                        : rank - previousRank - 1;
                if (between <= 0) {
                    return;
                }
                rule = Results.SKIP;
            }
            GenericInternalRow out = Results.result(rule, tp.topic(), tp.partition());
            out.update(Results.PROCESS, process);
            out.update(Results.SEQ, seq);
            out.update(Results.OFFSET, offset);
            out.update(Results.PREVIOUS_SEQ, previousSeq);
            out.update(Results.PREVIOUS_OFFSET, previousOffset);
            if (rule.equals(Results.SKIP)) {
                out.update(Results.OBSERVED_BETWEEN, between);
            }
            out.update(Results.SEL_ROWS, Results.pair(process, previousSeq, seq));
            emit(out);
        }

        private void endRun() {
            for (Map.Entry<List<Object>, Span> e : owning.entrySet()) {
                if (!lost.contains((Long) e.getKey().get(1))) {
                    ownerships.computeIfAbsent((UTF8String) e.getKey().get(0), k -> new ArrayList<>())
                            .add(e.getValue());
                }
            }
            owning.clear();
            lost.clear();
            owned = 0;
            previousRead = false;
            previousOffsetNull = true;
        }

        private void endPartition() {
            for (Map.Entry<UTF8String, List<Span>> e : ownerships.entrySet()) {
                Map<Long, Long> firsts = interleaved(e.getValue());
                if (firsts.isEmpty()) {
                    continue;
                }
                GenericInternalRow out = Results.result(Results.EXCLUSIVITY, tp.topic(),
                        tp.partition());
                out.update(Results.GROUP, e.getKey());
                out.update(Results.GENERATION, -1);
                List<long[]> pairs = new ArrayList<>();
                firsts.forEach((proc, seq) -> pairs.add(new long[] {proc, seq}));
                Results.processes(out, pairs, examples);
                emit(out);
            }
            ownerships.clear();
        }

        @Override
        void end() {
            if (tp.started()) {
                endRun();
                endPartition();
            }
        }
    }

    /** Per process with an ownership that interleaves another process's (one's first read at
     * or after the other's first and before its last), the lowest seq among such ownerships. */
    static Map<Long, Long> interleaved(List<Span> spans) {
        spans.sort((a, b) -> Long.compare(a.first, b.first));
        Map<Long, Long> firsts = new HashMap<>();
        int start = 0;
        for (Span a : spans) {
            while (spans.get(start).first < a.first) {
                start++;
            }
            for (int j = start; j < spans.size() && spans.get(j).first < a.last; j++) {
                Span b = spans.get(j);
                if (b.process != a.process) {
                    firsts.merge(a.process, a.seq, Math::min);
                    firsts.merge(b.process, b.seq, Math::min);
                }
            }
        }
        return firsts;
    }
}
