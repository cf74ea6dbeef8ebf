package harness.checker.jvm;

/**
 * A process's reads of a t/p in one unit a group rule judges (a generation of the classic
 * protocol, an ownership of the consumer protocol): the first read's seq (the row an example
 * shows) and the first and last read's time.
 */
final class Span {
    final long process;
    long seq, first, last;

    Span(long process, long seq, long time) {
        this.process = process;
        this.seq = seq;
        this.first = time;
        this.last = time;
    }

    /** Take in one more read. */
    void widen(long seq, long time) {
        this.seq = Math.min(this.seq, seq);
        this.first = Math.min(this.first, time);
        this.last = Math.max(this.last, time);
    }
}
