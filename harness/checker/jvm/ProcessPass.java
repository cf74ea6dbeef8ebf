package harness.checker.jvm;

import java.util.Iterator;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.roaringbitmap.RoaringBitmap;
import org.roaringbitmap.longlong.Roaring64Bitmap;

/**
 * The rules of the by-process grouping as two compiled passes, called by
 * harness.checker.spark_jvm: what spark_rules computes from every row by process with a
 * per-operation aggregation, a count per (process, seq) and a window over the sends.
 *
 * <p>The first pass walks each process's rows sorted by op and seq: per operation the
 * aggregates sql.op_aggregates names, emitted for the operations that may be malformed (the
 * Python side words the problem with sql.op_problem, so the messages live in one place) and,
 * for a known send, its invoke's seq and position for the second pass; per process, the
 * lowest seq two of its rows share (seqs kept in a compressed bitmap, so any numbering
 * fits), and one row to count the processes by; and every commit that counts, passed on for
 * commit_regression (by group and t/p, in SQL: commits are few). The second pass walks the
 * known sends by process, t/p and seq: an offset below the one before is a nonmonotonic_send.
 *
 * <p>Why: these rules as SQL cost 3.3 times a sorted walk of the grouping
 * (docs/benchmarks.md, "The compiled passes").
 */
public final class ProcessPass implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
    private static final long serialVersionUID = 1L;
    // The rule names (a result's rule column, which the Python side selects by), made once:
    // an immutable UTF8String may be shared by every row that names it.
    private static final UTF8String OP = rule("op"), SEQ_REUSED = rule("seq_reused"),
            PROCESS = rule("process"), NONMONOTONIC_SEND = rule("nonmonotonic_send"),
            COMMIT = rule("commit");
    static final StructType SCHEMA = new StructType()
            .add("rule", DataTypes.StringType).add("process", DataTypes.LongType)
            .add("op", DataTypes.LongType).add("seq", DataTypes.LongType)
            .add("topic", DataTypes.LongType).add("partition", DataTypes.IntegerType)
            .add("offset", DataTypes.LongType).add("previous_offset", DataTypes.LongType)
            .add("previous_op", DataTypes.LongType).add("bits", DataTypes.LongType)
            .add("invokes", DataTypes.LongType).add("completions", DataTypes.LongType)
            .add("value_min0", DataTypes.LongType).add("value_max0", DataTypes.LongType)
            .add("value_min1", DataTypes.LongType).add("value_max1", DataTypes.LongType)
            .add("sel_ops", DataTypes.createArrayType(DataTypes.LongType))
            .add("group", DataTypes.StringType).add("time_ns", DataTypes.LongType);
    /** The first pass's output: a known send, which the second pass walks sorted by process,
     * t/p and seq, or a result, Carried past that sort. */
    static final StructType SENDS = Carried.schema(SCHEMA, new Object[][] {
        {"process", DataTypes.LongType}, {"topic", DataTypes.LongType},
        {"partition", DataTypes.IntegerType}, {"seq", DataTypes.LongType},
        {"offset", DataTypes.LongType}, {"op", DataTypes.LongType},
    });
    private static final int S_PROCESS = 1, S_TOPIC = 2, S_PARTITION = 3, S_SEQ = 4,
            S_OFFSET = 5, S_OP = 6, S_WIDTH = 7;
    private static final int R_RULE = 0, R_PROCESS = 1, R_OP = 2, R_SEQ = 3, R_TOPIC = 4,
            R_PARTITION = 5, R_OFFSET = 6, R_PREVIOUS_OFFSET = 7, R_PREVIOUS_OP = 8, R_BITS = 9,
            R_INVOKES = 10, R_COMPLETIONS = 11, R_VALUE = 12, R_SEL_OPS = 16, R_GROUP = 17,
            R_TIME_NS = 18;
    static final String[] COLUMNS = {
        "process", "seq", "op", "code", "invoke", "h0", "h1", "topic", "partition", "offset",
        "known", "group", "time_ns",
    };
    private static final int PROCESS_ = 0, SEQ_ = 1, OP_ = 2, CODE = 3, INVOKE = 4, H0 = 5,
            H1 = 6, TOPIC = 7, PARTITION = 8, OFFSET = 9, KNOWN = 10, GROUP = 11, TIME_NS = 12;

    private final int[] at;
    private final long send, invoked, oneCompletion;

    /** `send`: sql.F_CODES' bit of a send; `invoked`, `oneCompletion`: the bits of the fs
     * history.INVOKED and history.ONE_COMPLETION name. */
    ProcessPass(StructType schema, long send, long invoked, long oneCompletion) {
        this.at = Results.indices(schema, COLUMNS);
        this.send = send;
        this.invoked = invoked;
        this.oneCompletion = oneCompletion;
    }

    /** Every result row (SCHEMA; rule names what it is) from `byProcess`: the grouping's rows,
     * each process in one partition, sorted by process, op and seq. */
    public static Dataset<Row> results(Dataset<Row> byProcess, long send, long invoked,
                                       long oneCompletion) {
        org.apache.spark.sql.classic.Dataset<Row> rows = (org.apache.spark.sql.classic.Dataset<Row>) byProcess;
        SparkSession session = rows.sparkSession();
        JavaRDD<InternalRow> first = rows.queryExecution().toRdd().toJavaRDD().mapPartitions(
                new ProcessPass(rows.schema(), send, invoked, oneCompletion), true);
        org.apache.spark.sql.classic.Dataset<Row> sends = session
                .internalCreateDataFrame(first.rdd(), SENDS, false)
                .sortWithinPartitions("process", "topic", "partition", "seq");
        JavaRDD<InternalRow> second = sends.queryExecution().toRdd().toJavaRDD()
                .mapPartitions(SendOrder::new, true);
        return session.internalCreateDataFrame(second.rdd(), SCHEMA, false);
    }

    private static UTF8String rule(String name) {
        return UTF8String.fromString(name);
    }

    @Override
    public Iterator<InternalRow> call(Iterator<InternalRow> rows) {
        return new Pass(rows);
    }

    private static GenericInternalRow row(UTF8String rule, Long process) {
        GenericInternalRow out = new GenericInternalRow(SCHEMA.size());
        out.update(R_RULE, rule);
        out.update(R_PROCESS, process);
        return out;
    }

    private final class Pass extends Walker {
        private boolean started, processNull, inOp;
        private long process, op;
        // The process's seqs so far: those in [0, 2^32) (a recorder's, counted from 0) in the
        // 32-bit bitmap, which tests and adds in one lookup; any other in the 64-bit one.
        private final RoaringBitmap seqs = new RoaringBitmap();
        private final Roaring64Bitmap otherSeqs = new Roaring64Bitmap();
        private boolean reused;
        private long lowestReused;
        // The operation being walked.
        private long bits, invokes, completions, sendSeq, topic, offset;
        private int partition;
        private boolean sendSeqSeen, known;
        private final long[] values = new long[4];  // min h0, max h0, min h1, max h1
        private boolean valued;

        Pass(Iterator<InternalRow> input) {
            super(input);
        }

        @Override
        void accept(InternalRow row) {
            boolean pNull = row.isNullAt(at[PROCESS_]);
            long p = pNull ? 0 : row.getLong(at[PROCESS_]);
            if (!started || pNull != processNull || p != process) {
                if (started) {
                    endProcess();
                }
                started = true;
                processNull = pNull;
                process = p;
            }
            long o = row.isNullAt(at[OP_]) ? Long.MIN_VALUE : row.getLong(at[OP_]);
            if (!inOp || o != op) {
                endOp();
                inOp = true;
                op = o;
            }
            if (!row.isNullAt(at[SEQ_])) {
                long seq = row.getLong(at[SEQ_]);
                if (!firstSight(seq)) {
                    lowestReused = reused ? Math.min(lowestReused, seq) : seq;
                    reused = true;
                }
            }
            long code = row.isNullAt(at[CODE]) ? 0 : row.getInt(at[CODE]);
            bits |= code;
            boolean invoke = !row.isNullAt(at[INVOKE]) && row.getBoolean(at[INVOKE]);
            if (row.isNullAt(at[INVOKE])) {
                // Neither an invoke nor a completion, as SQL counts a null comparison.
            } else if (invoke) {
                invokes++;
                if (code == send && !row.isNullAt(at[SEQ_])) {
                    long seq = row.getLong(at[SEQ_]);
                    sendSeq = sendSeqSeen ? Math.min(sendSeq, seq) : seq;
                    sendSeqSeen = true;
                }
            } else {
                completions++;
            }
            if (!row.isNullAt(at[H0])) {
                long h0 = row.getLong(at[H0]);
                long h1 = row.isNullAt(at[H1]) ? 0 : row.getInt(at[H1]);
                if (!valued) {
                    values[0] = values[1] = h0;
                    values[2] = values[3] = h1;
                    valued = true;
                } else {
                    values[0] = Math.min(values[0], h0);
                    values[1] = Math.max(values[1], h0);
                    values[2] = Math.min(values[2], h1);
                    values[3] = Math.max(values[3], h1);
                }
            }
            if (!row.isNullAt(at[GROUP])) {
                commit(row);
            }
            if (!row.isNullAt(at[KNOWN]) && row.getBoolean(at[KNOWN])) {
                long t = row.getLong(at[TOPIC]), off = row.getLong(at[OFFSET]);
                int part = row.getInt(at[PARTITION]);
                topic = known ? Math.max(topic, t) : t;
                partition = known ? Math.max(partition, part) : part;
                offset = known ? Math.max(offset, off) : off;
                known = true;
            }
        }

        /** Whether the process has not had `seq` before; remembered from now on. */
        private boolean firstSight(long seq) {
            if ((seq >>> 32) == 0) {
                return seqs.checkedAdd((int) seq);
            }
            if (otherSeqs.contains(seq)) {
                return false;
            }
            otherSeqs.addLong(seq);
            return true;
        }

        /** A commit that counts (sql.by_process gives only those a group), passed on as it is:
         * commit_regression judges them by group and t/p, in SQL. */
        private void commit(InternalRow row) {
            GenericInternalRow out = row(COMMIT, processNull ? null : process);
            out.update(R_GROUP, row.getUTF8String(at[GROUP]).copy());
            out.update(R_TOPIC, row.isNullAt(at[TOPIC]) ? null : row.getLong(at[TOPIC]));
            out.update(R_PARTITION, row.isNullAt(at[PARTITION]) ? null : row.getInt(at[PARTITION]));
            out.update(R_OFFSET, row.isNullAt(at[OFFSET]) ? null : row.getLong(at[OFFSET]));
            out.update(R_TIME_NS, row.isNullAt(at[TIME_NS]) ? null : row.getLong(at[TIME_NS]));
            out.update(R_SEQ, row.isNullAt(at[SEQ_]) ? null : row.getLong(at[SEQ_]));
            emitResult(out);
        }

        private void endOp() {
            if (!inOp) {
                return;
            }
            inOp = false;
            long low = Long.lowestOneBit(bits);
            boolean mixed = bits != low;
            boolean differ = valued && (values[0] != values[1] || values[2] != values[3]);
            boolean problem = mixed || invokes > 1
                    || ((low & invoked) != 0 && invokes == 0 && completions > 0)
                    || ((low & oneCompletion) != 0 && completions > 1)
                    || (low == send && differ);
            Long theProcess = processNull ? null : process;
            Long theOp = op == Long.MIN_VALUE ? null : op;
            if (problem) {
                GenericInternalRow out = row(OP, theProcess);
                out.update(R_OP, theOp);
                out.update(R_BITS, bits == 0 ? null : bits);
                out.update(R_INVOKES, invokes);
                out.update(R_COMPLETIONS, completions);
                for (int i = 0; i < 4; i++) {
                    out.update(R_VALUE + i, valued ? values[i] : null);
                }
                emitResult(out);
            }
            if (known && low == send && sendSeqSeen) {
                GenericInternalRow out = new GenericInternalRow(S_WIDTH);
                out.update(S_PROCESS, theProcess);
                out.update(S_OP, theOp);
                out.update(S_SEQ, sendSeq);
                out.update(S_TOPIC, topic);
                out.update(S_PARTITION, partition);
                out.update(S_OFFSET, offset);
                emit(out);
            }
            bits = invokes = completions = 0;
            sendSeqSeen = known = valued = false;
        }

        private void endProcess() {
            endOp();
            emitResult(row(PROCESS, processNull ? null : process));
            if (reused) {
                GenericInternalRow out = row(SEQ_REUSED, processNull ? null : process);
                out.update(R_SEQ, lowestReused);
                emitResult(out);
            }
            seqs.clear();
            otherSeqs.clear();
            reused = false;
        }

        /** A result, carried past the second pass's sort (Carried). */
        private void emitResult(GenericInternalRow result) {
            emit(Carried.result(result, S_WIDTH));
        }

        @Override
        void end() {
            if (started) {
                endProcess();
            }
        }
    }

    /** The second pass: the known sends by process, t/p and seq (the results pass through). */
    private static final class SendOrder extends Walker {
        private boolean any;
        private long process, topic, offset, op;
        private int partition;

        SendOrder(Iterator<InternalRow> input) {
            super(input);
        }

        @Override
        void accept(InternalRow row) {
            if (Carried.isResult(row)) {
                emit(Carried.result(row, SCHEMA));
                return;
            }
            long p = row.getLong(S_PROCESS), t = row.getLong(S_TOPIC);
            int part = row.getInt(S_PARTITION);
            long off = row.getLong(S_OFFSET), o = row.getLong(S_OP);
            if (any && p == process && t == topic && part == partition && off < offset) {
                GenericInternalRow out = row(NONMONOTONIC_SEND, p);
                out.update(R_TOPIC, t);
                out.update(R_PARTITION, part);
                out.update(R_SEQ, row.getLong(S_SEQ));
                out.update(R_OFFSET, off);
                out.update(R_OP, o);
                out.update(R_PREVIOUS_OFFSET, offset);
                out.update(R_PREVIOUS_OP, op);
                out.update(R_SEL_OPS, new GenericArrayData(new long[] {op, o}));
                emit(out);
            }
            any = true;
            process = p;
            topic = t;
            partition = part;
            offset = off;
            op = o;
        }

        @Override
        void end() {}
    }
}
