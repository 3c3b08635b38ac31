package dev.purgatory.it;

import java.time.Duration;

/** Waits for a condition on the broker with a generous deadline; not a timing assertion. */
public final class Wait {
    private Wait() {
    }

    @FunctionalInterface
    public interface Condition {
        boolean holds() throws Exception;
    }

    public static final Duration DEFAULT = Duration.ofSeconds(60);

    public static void until(String what, Condition condition) throws Exception {
        until(what, DEFAULT, condition);
    }

    public static void until(String what, Duration timeout, Condition condition) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.holds()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + timeout.toSeconds() + " s waiting for: " + what);
            }
            Thread.sleep(20);
        }
    }
}
